//! Hot swap: the set of resident guests, which one renders each AppService, and the fallback to
//! the last good guest.
//!
//! The set is swapped atomically ([`arc_swap`]): a reconcile picks its guest once, at its start,
//! so calls in flight finish on the guest they started with. [`source`] feeds new sets from a
//! ConfigMap after validating them, in the sandbox and with [`server_dry_run`] on the API
//! server; [`selector`] parses the canary's label selector; [`trust`]
//! signs guests and verifies their signatures.

pub mod selector;
pub mod server_dry_run;
pub mod source;
pub mod trust;
mod validate;

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

/// The guests resident at one moment.
#[derive(Clone)]
pub struct Set {
    /// Renders every AppService the canary does not select.
    pub stable: guest::Policy,
    /// An optional candidate for a subset of AppServices.
    pub canary: Option<Canary>,
    /// The stable guest before the last swap: the fallback when the stable guest fails.
    pub previous: Option<guest::Policy>,
}

impl Set {
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

    /// `(stable digest, canary digest and selector)`: two sets with the same key behave alike.
    pub fn key(&self) -> (String, Option<(String, String)>) {
        let canary = self
            .canary
            .as_ref()
            .map(|c| (c.policy.digest().to_owned(), c.selector_text.clone()));
        (self.stable.digest().to_owned(), canary)
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

/// The resident guests, shared by the controller and the ConfigMap source. Cheap to clone.
#[derive(Clone)]
pub struct Guests {
    set: Arc<ArcSwap<Set>>,
    trigger: mpsc::UnboundedSender<()>,
    receiver: Arc<Mutex<Option<mpsc::UnboundedReceiver<()>>>>,
}

impl Guests {
    /// Starts with `stable` alone.
    pub fn new(stable: guest::Policy) -> Self {
        let (trigger, receiver) = mpsc::unbounded();
        Self {
            set: Arc::new(ArcSwap::from_pointee(Set::single(stable))),
            trigger,
            receiver: Arc::new(Mutex::new(Some(receiver))),
        }
    }

    /// The set now in force.
    pub fn current(&self) -> Arc<Set> {
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
        self.set.store(Arc::new(Set {
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

/// Whether a failure of a guest warrants falling back to the last good guest: traps, limits
/// and invalid output do; a policy refusal (the guest saying no on purpose) does not.
pub fn warrants_fallback(error: &guest::Error) -> bool {
    !matches!(error, guest::Error::Policy(_))
}
