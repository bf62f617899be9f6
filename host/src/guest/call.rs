//! One guest call: a fresh Store with its limits ([`super::state`]), a fresh instance, the call,
//! and the mapping of failures to typed errors.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Engine, ResourceLimiter, Store, Trap};

use super::Error;
use super::bindings::{DesiredObject, types, v0_2};
use super::loader::Pre;
use super::report::{Condition, Event};
use super::state::State;

/// The limits of every call, derived once from the runtime's config.
#[derive(Debug)]
pub(super) struct Limits {
    pub deadline: Duration,
    pub deadline_ticks: u64,
    pub memory_limit: usize,
    pub fuel: Option<u64>,
}

/// What `render` returned, unchecked: objects (and for a 0.2 guest, conditions and Events), or
/// the guest's refusal.
pub(super) type Output = Result<Raw, types::PolicyError>;

/// A guest's output as it returned it; a 0.1 guest's has no conditions or Events.
pub(super) struct Raw {
    pub objects: Vec<DesiredObject>,
    pub conditions: Vec<Condition>,
    pub events: Vec<Event>,
}

impl Raw {
    /// A 0.1 guest's output.
    fn objects(objects: Vec<DesiredObject>) -> Self {
        Self {
            objects,
            conditions: Vec::new(),
            events: Vec::new(),
        }
    }
}

/// Instantiates the guest in a fresh Store and calls `render`.
pub(super) fn call(
    engine: &Engine,
    pre: &Pre,
    limits: &Limits,
    digest: &Arc<str>,
    input: &types::AppService,
) -> Result<Output, Error> {
    let state = State::new(digest.clone(), limits.memory_limit);
    let mut store = Store::new(engine, state);
    store.limiter(|s| s as &mut dyn ResourceLimiter);
    store.set_epoch_deadline(limits.deadline_ticks);
    if let Some(fuel) = limits.fuel {
        store
            .set_fuel(fuel)
            .map_err(|e| Error::Instantiate(e.into()))?;
    }
    // NB: the instance types differ by version; each arm instantiates, then calls.
    let output = match pre {
        Pre::V0_1(pre) => {
            let instance = match pre.instantiate(&mut store) {
                Ok(i) => i,
                Err(e) => return Err(instantiate_failed(e, &mut store, limits)),
            };
            instance
                .kudevops_appservice_policy()
                .call_render(&mut store, input)
                .map(|output| output.map(Raw::objects))
        }
        Pre::V0_2(pre) => {
            let instance = match pre.instantiate(&mut store) {
                Ok(i) => i,
                Err(e) => return Err(instantiate_failed(e, &mut store, limits)),
            };
            instance
                .kudevops_appservice_policy()
                .call_render(&mut store, &v0_2::input(input))
                .map(|output| {
                    output
                        .map(|rendering| {
                            let (objects, conditions, events) = v0_2::output(rendering);
                            Raw {
                                objects,
                                conditions,
                                events,
                            }
                        })
                        .map_err(types::PolicyError::from)
                })
        }
    };
    let state = store.data_mut();
    state.finish_wasi();
    output.map_err(|e| classify(e, state, limits))
}

/// Maps a failed instantiation: a limit it hit (a start function may loop or allocate), else an
/// instantiation error.
fn instantiate_failed(e: wasmtime::Error, store: &mut Store<State>, limits: &Limits) -> Error {
    if is_limit(&e, store.data()) {
        store.data_mut().finish_wasi();
        return classify(e, store.data_mut(), limits);
    }
    Error::Instantiate(e.into())
}

fn is_limit(e: &wasmtime::Error, state: &State) -> bool {
    state.memory_exceeded || e.downcast_ref::<Trap>().is_some()
}

/// Maps a failed call to the limit it hit, or to a trap with its one-line root cause.
fn classify(e: wasmtime::Error, state: &mut State, limits: &Limits) -> Error {
    if state.memory_exceeded {
        return Error::Memory(limits.memory_limit);
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Error::Deadline(limits.deadline),
        Some(Trap::OutOfFuel) => Error::Fuel(limits.fuel.unwrap_or_default()),
        Some(trap) => Error::Trap {
            reason: trap.to_string(),
            guest_message: state.last_error.take(),
        },
        None => Error::Trap {
            reason: e.root_cause().to_string(),
            guest_message: state.last_error.take(),
        },
    }
}
