//! One guest call: a fresh Store with its limits, a fresh instance, the call, and the mapping of
//! failures to typed errors.

use std::sync::Arc;
use std::time::Duration;

use tracing::{Level, event, warn};
use wasmtime::{Engine, ResourceLimiter, Store, Trap};

use wasmtime_wasi::{WasiCtxView, WasiView};

use super::bindings::{DesiredObject, host, types, v0_2};
use super::loader::Pre;
use super::report::{Condition, Event};
use super::wasi::Wasi;
use super::{Error, TABLE_ELEMENT_BYTES};
use crate::text::truncate_then_mark;

/// Log lines kept per call; the rest are dropped with one warning.
const MAX_LOG_LINES: u32 = 32;
/// Bytes kept of one guest log line.
const MAX_LOG_BYTES: usize = 1024;
/// Table elements a guest may grow to.
const MAX_TABLE_ELEMENTS: usize = 10_000;

/// The limits of every call, derived once from the runtime's config.
#[derive(Debug)]
pub(super) struct Limits {
    pub deadline: Duration,
    pub deadline_ticks: u64,
    pub memory_limit: usize,
    pub fuel: Option<u64>,
}

/// The per-call host state: the limiter, the log budget and, once the guest calls WASI, its
/// locked-down WASI context.
pub(super) struct State {
    digest: Arc<str>,
    memory_limit: usize,
    /// Bytes of every memory and table of this Store's instance, as granted so far.
    memory_used: usize,
    memory_exceeded: bool,
    log_lines: u32,
    last_error: Option<String>,
    /// NB: made on the first WASI call (`State::wasi`), so guests that never call WASI pay
    /// nothing for it.
    wasi: Option<Box<Wasi>>,
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
    let state = State {
        digest: digest.clone(),
        memory_limit: limits.memory_limit,
        memory_used: 0,
        memory_exceeded: false,
        log_lines: 0,
        last_error: None,
        wasi: None,
    };
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

impl State {
    /// The guest's WASI context, made on first use.
    pub(super) fn wasi(&mut self) -> &mut Wasi {
        let digest = &self.digest;
        self.wasi.get_or_insert_with(|| Box::new(Wasi::new(digest)))
    }

    /// Logs the guest's unfinished stdio lines; its last stderr line (a runtime's report of an
    /// uncaught exception) stands for the error message when it logged none through `host.log`.
    fn finish_wasi(&mut self) {
        if let Some(line) = self.wasi.as_ref().and_then(|w| w.finish())
            && self.last_error.is_none()
        {
            self.last_error = Some(line);
        }
    }

    /// Grants a growth of one memory or table from `current` to `desired` bytes if the instance's
    /// total stays within the limit. NB: wasmtime asks with `current` 0 when it creates a memory
    /// or table, so the total covers the initial sizes as well.
    fn grow(&mut self, what: &str, current: usize, desired: usize) -> wasmtime::Result<bool> {
        let total = self
            .memory_used
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.memory_limit {
            // NB: an error (not `Ok(false)`) traps at once with this message, instead of letting
            // the guest's allocator abort with a bare `unreachable`.
            self.memory_exceeded = true;
            wasmtime::bail!(
                "guest {what} would bring the instance to {total} bytes, over the {} byte limit",
                self.memory_limit
            );
        }
        // NB: a growth that then fails stays counted: the total only errs on the safe side.
        self.memory_used = total;
        Ok(true)
    }
}

impl ResourceLimiter for State {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow("memory", current, desired)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.grow(
            "table",
            current.saturating_mul(TABLE_ELEMENT_BYTES),
            desired.saturating_mul(TABLE_ELEMENT_BYTES),
        )
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi().view()
    }
}

impl types::Host for State {}

impl v0_2::types::Host for State {}

impl v0_2::host::Host for State {
    fn log(&mut self, level: v0_2::types::LogLevel, message: String) {
        host::Host::log(self, level.into(), message);
    }
}

impl host::Host for State {
    fn log(&mut self, level: types::LogLevel, message: String) {
        let message = truncate_then_mark(message, MAX_LOG_BYTES);
        if matches!(level, types::LogLevel::Error) {
            self.last_error = Some(message.clone());
        }
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                warn!(target: "guest", digest = %self.digest, "guest log budget of {MAX_LOG_LINES} lines per call exhausted; dropping the rest");
            }
            return;
        }
        let digest = &*self.digest;
        match level {
            types::LogLevel::Trace => event!(target: "guest", Level::TRACE, digest, "{message}"),
            types::LogLevel::Debug => event!(target: "guest", Level::DEBUG, digest, "{message}"),
            types::LogLevel::Info => event!(target: "guest", Level::INFO, digest, "{message}"),
            types::LogLevel::Warn => event!(target: "guest", Level::WARN, digest, "{message}"),
            types::LogLevel::Error => event!(target: "guest", Level::ERROR, digest, "{message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(memory_limit: usize) -> State {
        State {
            digest: "sha256:test".into(),
            memory_limit,
            memory_used: 0,
            memory_exceeded: false,
            log_lines: 0,
            last_error: None,
            wasi: None,
        }
    }

    #[test]
    fn the_limit_covers_every_memory_and_table_together() {
        let mut s = state(1000);
        assert!(s.memory_growing(0, 400, None).expect("fits"));
        assert!(
            s.memory_growing(0, 400, None)
                .expect("a second memory fits")
        );
        // 10 elements of 16 bytes: 960 in all.
        assert!(s.table_growing(0, 10, None).expect("the table fits"));
        assert_eq!(s.memory_used, 960);
        let err = s
            .memory_growing(400, 450, None)
            .expect_err("one memory alone would fit, the instance does not");
        assert!(err.to_string().contains("1010 bytes"), "{err}");
        assert!(s.memory_exceeded);
    }

    #[test]
    fn growth_counts_only_the_difference() {
        let mut s = state(1000);
        assert!(s.memory_growing(0, 600, None).expect("fits"));
        assert!(
            s.memory_growing(600, 1000, None)
                .expect("grows to the limit")
        );
        assert_eq!(s.memory_used, 1000);
        assert!(!s.memory_exceeded);
    }

    #[test]
    fn a_table_past_its_element_cap_is_refused_without_a_trap() {
        let mut s = state(usize::MAX);
        assert!(
            !s.table_growing(0, MAX_TABLE_ELEMENTS + 1, None)
                .expect("no trap")
        );
        assert_eq!(s.memory_used, 0);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate_then_mark("short".into(), 10), "short");
        assert_eq!(truncate_then_mark("abcdef".into(), 3), "abc…");
        assert_eq!(truncate_then_mark("ééé".into(), 3), "é…");
    }
}
