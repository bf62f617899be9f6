//! Hot swap: the set of resident guests, which one renders each AppService, and the fallback to
//! the last good guest.
//!
//! The set is swapped atomically ([`arc_swap`]): a reconcile picks its guest once, at its start,
//! so calls in flight finish on the guest they started with. [`source`] feeds new sets from a
//! ConfigMap ([`contents`]) after checking them ([`trust`] for signatures, [`pin`] for pinned
//! digests, then a dry run in the sandbox and with [`server_dry_run`] on the API server) and
//! keeps a [`record`] of the set in force; [`selector`] parses the canary's label selector.

pub mod contents;
mod dry_run;
mod judge;
mod note_recorder;
pub mod pin;
pub mod record;
pub mod regression;
pub mod rejection;
pub mod selector;
pub mod server_dry_run;
pub mod source;
pub mod trust;

use std::fmt;

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use futures::channel::mpsc;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};

use crate::crd::AppService;
use crate::guest;

/// A candidate guest for the AppServices its selector matches.
#[derive(Clone)]
pub struct Canary {
    /// The guest.
    pub policy: guest::Policy,
    /// Which AppServices it renders, by their labels.
    pub selector: Selector,
    /// The selector as written, for status and logs.
    pub selector_text: String,
}

/// The guests in force at one moment: a snapshot of [`Guests`], which swaps whole snapshots.
#[derive(Clone)]
pub struct InForce {
    /// Renders every AppService the canary does not select.
    pub stable: guest::Policy,
    /// An optional candidate for a subset of AppServices.
    pub canary: Option<Canary>,
    /// The stable guest before the last swap: the fallback when the stable guest fails.
    pub previous: Option<guest::Policy>,
}

impl InForce {
    /// The set with one guest and nothing else.
    pub fn single(stable: guest::Policy) -> Self {
        Self {
            stable,
            canary: None,
            previous: None,
        }
    }

    /// The guest that renders `app`, and the one to fall back to if it fails.
    pub fn select(&self, app: &AppService) -> Selected {
        match &self.canary {
            Some(c) if c.selector.matches(app.labels()) => Selected {
                policy: c.policy.clone(),
                fallback: Some(self.stable.clone()),
            },
            _ => Selected {
                policy: self.stable.clone(),
                fallback: self
                    .previous
                    .clone()
                    .filter(|p| p.digest() != self.stable.digest()),
            },
        }
    }

    /// What makes the set behave as it does: two sets with the same key behave alike.
    pub fn key(&self) -> InForceKey {
        InForceKey {
            stable: self.stable.digest().to_owned(),
            canary: self.canary.as_ref().map(|c| CanaryKey {
                digest: c.policy.digest().to_owned(),
                selector: c.selector_text.clone(),
            }),
        }
    }
}

/// The digests of a set's guests and the canary's selector: [`InForce::key`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InForceKey {
    /// Digest of the stable guest.
    pub stable: String,
    /// The canary, if any.
    pub canary: Option<CanaryKey>,
}

/// The canary part of a [`InForceKey`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryKey {
    /// Digest of the canary guest.
    pub digest: String,
    /// Its label selector, as written.
    pub selector: String,
}

/// Which place in a set a guest takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Renders every AppService the canary does not select.
    Stable,
    /// Renders the AppServices its selector matches.
    Canary,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Stable => "stable",
            Role::Canary => "canary",
        })
    }
}

/// The guest chosen for one AppService.
#[derive(Clone)]
pub struct Selected {
    /// Renders the AppService.
    pub policy: guest::Policy,
    /// The last good guest for it (the stable guest for a canary, the previous stable guest
    /// otherwise), used when `policy` traps, hits a limit or emits invalid output.
    pub fallback: Option<guest::Policy>,
}

/// The handle on the guests in force, shared by the controller and the ConfigMap source: each
/// [`Guests::current`] is one [`InForce`] snapshot, replaced whole by [`Guests::activate`]. Cheap
/// to clone.
#[derive(Clone)]
pub struct Guests {
    set: Arc<ArcSwap<InForce>>,
    trigger: mpsc::UnboundedSender<()>,
    receiver: Arc<Mutex<Option<mpsc::UnboundedReceiver<()>>>>,
}

impl Guests {
    /// Starts with `stable` alone.
    pub fn new(stable: guest::Policy) -> Self {
        let (trigger, receiver) = mpsc::unbounded();
        Self {
            set: Arc::new(ArcSwap::from_pointee(InForce::single(stable))),
            trigger,
            receiver: Arc::new(Mutex::new(Some(receiver))),
        }
    }

    /// The set now in force.
    pub fn current(&self) -> Arc<InForce> {
        self.set.load_full()
    }

    /// The guest that renders `app` now.
    pub fn select(&self, app: &AppService) -> Selected {
        self.set.load().select(app)
    }

    /// Puts `stable` and `canary` in force at once and asks for every AppService to be
    /// reconciled again. The stable guest being replaced becomes the fallback.
    pub fn activate(&self, stable: guest::Policy, canary: Option<Canary>) {
        let old = self.set.load_full();
        let previous = if old.stable.digest() == stable.digest() {
            old.previous.clone()
        } else {
            Some(old.stable.clone())
        };
        self.set.store(Arc::new(InForce {
            stable,
            canary,
            previous,
        }));
        // NB: fails only when the controller has stopped; nothing is left to reconcile then.
        let _ = self.trigger.unbounded_send(());
    }

    /// The stream of "reconcile everything" requests, for `Controller::reconcile_all_on`. Only
    /// the first caller gets it.
    pub fn take_trigger(&self) -> Option<mpsc::UnboundedReceiver<()>> {
        self.receiver
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl From<guest::Policy> for Guests {
    fn from(stable: guest::Policy) -> Self {
        Self::new(stable)
    }
}
