//! What a 0.2.0 guest reports besides objects, its conditions and Events, checked against the
//! host's bounds whatever the guest returns.
//!
//! The structured parts are refused: too many conditions or Events, a condition type that is not
//! a qualified name or that the host owns, a type given twice, a reason out of format. A refusal
//! fails the whole render ([`super::Error::InvalidOutput`]), so nothing of it is applied, written
//! or recorded. Free text (a condition's message, an Event's note) is cut to the API server's
//! limit instead. The bounds are Kubernetes' own (`metav1.Condition`, `events.k8s.io/v1`).

use std::collections::HashSet;

use crate::consts::{HOST_CONDITION_PREFIX, HOST_CONDITION_TYPES};
use crate::text::truncate_marked;

/// Most conditions one render may return.
pub const MAX_CONDITIONS: usize = 8;
/// Most Events one render may return.
pub const MAX_EVENTS: usize = 4;
/// Longest condition type (`metav1.Condition`: a 253-byte prefix, `/` and a 63-byte name).
pub const MAX_CONDITION_TYPE: usize = 316;
/// Longest condition reason (`metav1.Condition`).
pub const MAX_CONDITION_REASON: usize = 1024;
/// Longest condition message kept, in bytes (`metav1.Condition`).
pub const MAX_CONDITION_MESSAGE: usize = 32768;
/// Longest Event reason (`events.k8s.io/v1`).
pub const MAX_EVENT_REASON: usize = 128;
/// Longest Event note kept, in bytes: the API server allows 1 KiB; the host's own notes are cut
/// at the same length.
pub const MAX_EVENT_NOTE: usize = 1000;

/// The status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The API's spelling: `True`, `False` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// The type of an Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// A condition a guest returned, to merge into `status.conditions` by type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Condition {
    /// A qualified name the host does not own.
    pub type_: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// CamelCase.
    pub reason: String,
    /// Human-readable, at most [`MAX_CONDITION_MESSAGE`] bytes once checked.
    pub message: String,
}

/// An Event a guest returned, to record on the AppService.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// CamelCase.
    pub reason: String,
    /// Human-readable, at most [`MAX_EVENT_NOTE`] bytes once checked.
    pub note: String,
}

/// What a guest reported besides its objects, within the bounds: conditions sorted by type,
/// Events without repeats, in the guest's order. Empty for a 0.1.0 guest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Conditions of distinct types, sorted by type.
    pub conditions: Vec<Condition>,
    /// Distinct Events.
    pub events: Vec<Event>,
}

/// What the host refuses in a guest's report.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// More conditions than [`MAX_CONDITIONS`].
    #[error("{0} conditions returned, over the limit of {MAX_CONDITIONS}")]
    TooManyConditions(usize),
    /// More Events than [`MAX_EVENTS`].
    #[error("{0} Events returned, over the limit of {MAX_EVENTS}")]
    TooManyEvents(usize),
    /// The condition type is not a qualified name of at most [`MAX_CONDITION_TYPE`] characters.
    #[error(
        "condition type {0:?} is not a qualified name of at most {MAX_CONDITION_TYPE} characters"
    )]
    ConditionType(String),
    /// The condition type is one the host writes, or under its prefix.
    #[error(
        "condition type {0:?} is the host's (it owns {HOST_CONDITION_TYPES:?} and {HOST_CONDITION_PREFIX}*)"
    )]
    HostOwned(String),
    /// The same condition type is returned twice.
    #[error("condition type {0:?} is returned more than once")]
    DuplicateCondition(String),
    /// A condition's reason is not CamelCase of at most [`MAX_CONDITION_REASON`] characters.
    #[error(
        "condition {type_:?} has reason {reason:?}, not `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$` of at most {MAX_CONDITION_REASON} characters"
    )]
    ConditionReason {
        /// The condition's type.
        type_: String,
        /// The reason, cut to 64 bytes.
        reason: String,
    },
    /// An Event's reason is not CamelCase of at most [`MAX_EVENT_REASON`] characters.
    #[error(
        "Event reason {0:?} is not `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$` of at most {MAX_EVENT_REASON} characters"
    )]
    EventReason(String),
}

/// Checks a guest's conditions and Events against the bounds, cutting messages and notes.
pub(super) fn check(conditions: Vec<Condition>, events: Vec<Event>) -> Result<Report, Violation> {
    if conditions.len() > MAX_CONDITIONS {
        return Err(Violation::TooManyConditions(conditions.len()));
    }
    if events.len() > MAX_EVENTS {
        return Err(Violation::TooManyEvents(events.len()));
    }
    let mut types = HashSet::new();
    let mut checked = Vec::with_capacity(conditions.len());
    for mut c in conditions {
        if c.type_.len() > MAX_CONDITION_TYPE || !is_qualified_name(&c.type_) {
            return Err(Violation::ConditionType(short(c.type_)));
        }
        if is_host_owned(&c.type_) {
            return Err(Violation::HostOwned(c.type_));
        }
        if !is_reason(&c.reason, MAX_CONDITION_REASON) {
            return Err(Violation::ConditionReason {
                type_: c.type_,
                reason: short(c.reason),
            });
        }
        if !types.insert(c.type_.clone()) {
            return Err(Violation::DuplicateCondition(c.type_));
        }
        c.message = truncate_marked(c.message, MAX_CONDITION_MESSAGE);
        checked.push(c);
    }
    checked.sort_by(|a, b| a.type_.cmp(&b.type_));
    let mut distinct = Vec::with_capacity(events.len());
    for mut e in events {
        if !is_reason(&e.reason, MAX_EVENT_REASON) {
            return Err(Violation::EventReason(short(e.reason)));
        }
        e.note = truncate_marked(e.note, MAX_EVENT_NOTE);
        if !distinct.contains(&e) {
            distinct.push(e);
        }
    }
    Ok(Report {
        conditions: checked,
        events: distinct,
    })
}

/// Whether the host owns condition type `t`: one it writes (in any case, so that `ready` cannot
/// pass for `Ready`), or one under [`HOST_CONDITION_PREFIX`].
pub fn is_host_owned(t: &str) -> bool {
    HOST_CONDITION_TYPES
        .iter()
        .any(|h| h.eq_ignore_ascii_case(t))
        || t.to_ascii_lowercase().starts_with(HOST_CONDITION_PREFIX)
}

/// A Kubernetes qualified name: an optional DNS-1123 subdomain prefix and `/`, then 1 to 63
/// alphanumerics, `-`, `_` or `.`, alphanumeric at both ends.
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    let b = name.as_bytes();
    let name_ok = (1..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(|p| !p.is_empty() && super::names::is_dns1123_subdomain(p))
}

/// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, 1 to `max` characters.
fn is_reason(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    (1..=max).contains(&b.len())
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':'))
        && (b[b.len() - 1].is_ascii_alphanumeric() || b[b.len() - 1] == b'_')
}

/// A refused value, cut for the error message.
fn short(s: String) -> String {
    truncate_marked(s, 64)
}

#[cfg(test)]
mod tests;
