//! Errors of the guest runtime: one variant per way loading or calling a guest can fail.

use std::fmt;
use std::time::Duration;

use super::admission::Refused;
use super::validate::Violation;

/// A boxed error source; wasmtime's own error type does not leave `guest/`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of the guest runtime. Expected guest refusals are [`Error::Policy`]; every other
/// variant means a bug in the guest, a limit it hit, or a problem on the host.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime's [`Config`](super::Config) is unusable, e.g. it allows a forbidden kind.
    #[error("invalid guest runtime configuration: {0}")]
    Config(String),
    /// The wasmtime engine could not be built.
    #[error("failed to build the guest engine")]
    Engine(#[source] BoxError),
    /// The bytes do not compile as a component implementing `kudevops:appservice`.
    #[error("failed to load guest {digest}")]
    Load {
        /// `sha256:<hex>` of the bytes.
        digest: String,
        /// What wasmtime reported.
        #[source]
        source: BoxError,
    },
    /// A precompiled artifact could not be written (`app-operator guest precompile`).
    #[error("failed to write the precompiled guest {}", path.display())]
    Precompile {
        /// Where it was to be written.
        path: std::path::PathBuf,
        /// Why it could not be.
        #[source]
        source: BoxError,
    },
    /// No fresh instance could be made, e.g. the instance pool is exhausted.
    #[error("failed to instantiate the guest")]
    Instantiate(#[source] BoxError),
    /// The guest trapped: a panic, an `unreachable`, or a call to a capability it lacks.
    #[error("guest trapped: {}", Trapped(reason, guest_message))]
    Trap {
        /// The trap's one-line root cause, e.g. ``wasm trap: wasm `unreachable` instruction
        /// executed``.
        reason: String,
        /// The guest's last error-level log line of the call (a panic message, for guests that
        /// route panics to `log`), truncated.
        guest_message: Option<String>,
    },
    /// The call ran past the wall-clock deadline (epoch interruption).
    #[error("guest exceeded its deadline of {0:?}")]
    Deadline(Duration),
    /// The call used up its fuel budget.
    #[error("guest ran out of fuel ({0} units)")]
    Fuel(u64),
    /// The guest tried to grow its memories and tables past the per-instance cap, in bytes.
    #[error("guest exceeded its memory limit of {0} bytes")]
    Memory(usize),
    /// The guest returned objects the host refuses to apply.
    #[error("guest produced invalid output")]
    InvalidOutput(#[from] Violation),
    /// The host refused the guest's output: it breaks the output policy (pod security,
    /// Services, ServiceAccounts, object count). Nothing of it may be applied.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The guest refused the AppService (a `policy-error` result).
    #[error("guest rejected the AppService")]
    Policy(#[from] PolicyError),
    /// The blocking task running a load or a call failed (a host panic or a runtime shutdown).
    #[error("guest call task failed")]
    Task(#[source] tokio::task::JoinError),
}

impl Error {
    /// A fixed, low-cardinality name of the variant, for metric labels and conditions.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Engine(_) => "engine",
            Error::Load { .. } => "load",
            Error::Precompile { .. } => "precompile",
            Error::Instantiate(_) => "instantiate",
            Error::Trap { .. } => "trap",
            Error::Deadline(_) => "deadline",
            Error::Fuel(_) => "fuel",
            Error::Memory(_) => "memory",
            Error::InvalidOutput(_) => "invalid_output",
            Error::Refused(_) => "refused",
            Error::Policy(_) => "policy",
            Error::Task(_) => "task",
        }
    }

    /// The reason a condition or an Event gives for the failure, in the API's CamelCase.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Trap { .. } => "Trap",
            Error::Deadline(_) => "DeadlineExceeded",
            Error::Fuel(_) => "OutOfFuel",
            Error::Memory(_) => "MemoryLimitExceeded",
            Error::InvalidOutput(_) => "InvalidOutput",
            Error::Refused(_) => "OutputRefused",
            Error::Policy(_) => "PolicyError",
            Error::Config(_)
            | Error::Engine(_)
            | Error::Load { .. }
            | Error::Precompile { .. }
            | Error::Instantiate(_)
            | Error::Task(_) => "RuntimeError",
        }
    }

    /// Whether the same call may succeed when tried again: it missed its wall-clock deadline
    /// (the machine may have been busy), found no free instance, or its task failed. Every
    /// other failure is a verdict on the guest and the input: the same call fails the same way.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Deadline(_) | Error::Instantiate(_) | Error::Task(_) => true,
            Error::Config(_)
            | Error::Engine(_)
            | Error::Load { .. }
            | Error::Precompile { .. }
            | Error::Trap { .. }
            | Error::Fuel(_)
            | Error::Memory(_)
            | Error::InvalidOutput(_)
            | Error::Refused(_)
            | Error::Policy(_) => false,
        }
    }

    /// Whether the call never ran to a verdict: its blocking task failed (a host panic or a
    /// runtime shutdown). Transient like a missed deadline, but it says nothing about the guest:
    /// a dry run that meets it is no verdict at all, and is not retried render by render.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Error::Task(_))
    }

    /// Whether the failure warrants rendering with the last good guest instead: the guest is
    /// broken for this input (a trap, a limit, output the host refuses). Not a policy refusal
    /// (the guest saying no on purpose), and not a transient failure, which is retried with
    /// backoff: a rollback is a rollout, and must not depend on how busy the machine was.
    pub fn warrants_fallback(&self) -> bool {
        !matches!(self, Error::Policy(_)) && !self.is_transient()
    }
}

/// Renders a trap reason with the guest's own message, when it left one.
struct Trapped<'a>(&'a String, &'a Option<String>);

impl fmt::Display for Trapped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(msg) => write!(f, "{} (guest said: {msg})", self.0),
            None => f.write_str(self.0),
        }
    }
}

/// Why a guest refused to render: the contract's `policy-error`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The spec cannot be rendered; the message names the field.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The spec asks for something the policy does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Error, PolicyError};

    #[test]
    fn only_a_broken_guest_warrants_a_rollback() {
        let trap = Error::Trap {
            reason: "unreachable".into(),
            guest_message: None,
        };
        for broken in [trap, Error::Fuel(1), Error::Memory(1)] {
            assert!(broken.warrants_fallback(), "{broken}");
            assert!(!broken.is_transient(), "{broken}");
        }
        // A missed deadline may be the machine's fault: retried by the same guest, not rolled
        // back (a rollback is a rollout).
        let deadline = Error::Deadline(Duration::from_millis(100));
        assert!(deadline.is_transient());
        assert!(!deadline.warrants_fallback());
        assert_eq!(deadline.reason(), "DeadlineExceeded");
        let refusal = Error::Policy(PolicyError::Other("no".into()));
        assert!(!refusal.warrants_fallback() && !refusal.is_transient());
        assert_eq!(refusal.reason(), "PolicyError");
    }
}
