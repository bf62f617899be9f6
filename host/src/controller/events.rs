//! The Events a reconcile publishes, derived from what it did, without I/O (like the status).
//!
//! Events are for what a person would want to see on `kubectl describe appservice`: failures,
//! a rollback to the last good guest, a child changed outside the operator and set back, and a
//! child deleted because the guest no longer renders it. Routine work (creating the children of a
//! new AppService, following its spec or a new guest) shows in the status and the log, not as
//! one Event per reconcile. Repeats of one Event are aggregated into a series by kube's
//! [`Recorder`](kube::runtime::events::Recorder). A 0.2.0 guest's own Events go the same way,
//! when its set of Events for the AppService changes ([`super::reported`]).

use kube::runtime::events::{Event, EventType};

use super::status::Outcome;
use crate::guest;
use crate::text::truncate;

/// Longest Event note kept (the API server allows 1 KiB).
const MAX_NOTE: usize = 1000;

/// What a reconcile did that a person may want to see, besides its [`Outcome`].
#[derive(Debug, Default)]
pub(super) struct Facts {
    /// The guest selected for the AppService failed and its fallback rendered instead.
    pub rolled_back: Option<RolledBack>,
    /// `Kind/name` of the children someone else had changed, applied again.
    pub corrected: Vec<String>,
    /// `Kind/name` of the children deleted because the guest no longer renders them.
    pub pruned: Vec<String>,
    /// The guest's own Events, when its set of them has changed since the last render.
    pub guest: Vec<guest::Event>,
}

/// A fall back to the last good guest.
#[derive(Debug)]
pub(super) struct RolledBack {
    /// Digest of the guest that failed.
    pub failed: String,
    /// Digest of the last good guest, which rendered instead.
    pub fallback: String,
    /// Why the guest failed.
    pub error: String,
}

/// The Events to publish on the AppService after a reconcile that ended in `outcome`.
pub(super) fn derive(outcome: &Outcome<'_>, facts: &Facts) -> Vec<Event> {
    let mut events = Vec::new();
    let mut push = |type_, reason: &str, action: &str, note: String| {
        events.push(Event {
            type_,
            reason: reason.into(),
            note: Some(truncate(note, MAX_NOTE)),
            action: action.into(),
            secondary: None,
        });
    };
    if let Some(r) = &facts.rolled_back {
        let note = format!(
            "guest {} failed ({}); rendered with the last good guest {}",
            r.failed, r.error, r.fallback
        );
        push(EventType::Warning, "GuestRolledBack", "Render", note);
    }
    match outcome {
        Outcome::GuestFailed { message, .. } | Outcome::OutputRefused { message } => {
            let reason = match outcome {
                Outcome::OutputRefused { .. } => "OutputRefused",
                _ => "GuestFailed",
            };
            let note = format!("guest output not applied, children left untouched: {message}");
            push(EventType::Warning, reason, "Render", note);
        }
        Outcome::ApplyFailed { reason, message } => {
            push(EventType::Warning, reason, "Apply", message.clone());
        }
        Outcome::Applied { .. } => {}
    }
    if !facts.corrected.is_empty() {
        let note = format!(
            "applied {} again: changed outside the operator",
            facts.corrected.join(", ")
        );
        push(EventType::Normal, "Corrected", "Apply", note);
    }
    if !facts.pruned.is_empty() {
        let note = format!(
            "deleted {}, no longer rendered by the guest",
            facts.pruned.join(", ")
        );
        push(EventType::Normal, "Pruned", "Prune", note);
    }
    for e in &facts.guest {
        let type_ = match e.type_ {
            guest::EventType::Normal => EventType::Normal,
            guest::EventType::Warning => EventType::Warning,
        };
        push(type_, &e.reason, GUEST_ACTION, e.note.clone());
    }
    events
}

/// The `action` of a guest's own Events.
pub(super) const GUEST_ACTION: &str = "GuestReport";

#[cfg(test)]
mod tests {
    use super::*;

    fn reasons(events: &[Event]) -> Vec<(&str, bool)> {
        events
            .iter()
            .map(|e| (e.reason.as_str(), e.type_ == EventType::Warning))
            .collect()
    }

    const APPLIED: Outcome<'static> = Outcome::Applied {
        deployment: None,
        guest: "sha256:a",
    };

    #[test]
    fn routine_applies_publish_nothing() {
        assert!(derive(&APPLIED, &Facts::default()).is_empty());
    }

    #[test]
    fn failures_are_warnings_naming_what_was_left_alone() {
        let failed = Outcome::GuestFailed {
            reason: "Trap",
            message: "boom".into(),
        };
        let events = derive(&failed, &Facts::default());
        assert_eq!(reasons(&events), [("GuestFailed", true)]);
        let note = events[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains("boom") && note.contains("untouched"),
            "{note}"
        );

        let refused = Outcome::OutputRefused {
            message: "spec.hostNetwork".into(),
        };
        assert_eq!(
            reasons(&derive(&refused, &Facts::default())),
            [("OutputRefused", true)]
        );
        let conflict = Outcome::ApplyFailed {
            reason: "ChildConflict",
            message: "Deployment web has no controller".into(),
        };
        assert_eq!(
            reasons(&derive(&conflict, &Facts::default())),
            [("ChildConflict", true)]
        );
    }

    #[test]
    fn a_rollback_corrections_and_prunes_are_each_one_event() {
        let facts = Facts {
            rolled_back: Some(RolledBack {
                failed: "sha256:b".into(),
                fallback: "sha256:a".into(),
                error: "trap".into(),
            }),
            corrected: vec!["Deployment/web".into(), "Service/web".into()],
            pruned: vec!["Service/old".into()],
            guest: Vec::new(),
        };
        let events = derive(&APPLIED, &facts);
        assert_eq!(
            reasons(&events),
            [
                ("GuestRolledBack", true),
                ("Corrected", false),
                ("Pruned", false)
            ]
        );
        let corrected = events[1].note.as_deref().unwrap_or_default();
        assert!(
            corrected.contains("Deployment/web, Service/web"),
            "{corrected}"
        );
    }

    #[test]
    fn guest_events_keep_their_type_reason_and_note() {
        let facts = Facts {
            guest: vec![guest::Event {
                type_: guest::EventType::Warning,
                reason: "ImageNotPinned".into(),
                note: "nginx:1.27 is not pinned".into(),
            }],
            ..Facts::default()
        };
        let events = derive(&APPLIED, &facts);
        assert_eq!(reasons(&events), [("ImageNotPinned", true)]);
        assert_eq!(events[0].action, GUEST_ACTION);
        assert_eq!(events[0].note.as_deref(), Some("nginx:1.27 is not pinned"));
    }

    #[test]
    fn long_notes_are_cut() {
        let failed = Outcome::GuestFailed {
            reason: "Trap",
            message: "é".repeat(2000),
        };
        let note = derive(&failed, &Facts::default())[0].note.clone();
        assert!(note.unwrap_or_default().len() <= MAX_NOTE);
    }
}
