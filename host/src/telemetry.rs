//! Logging set-up: `tracing` to stderr, as human-readable text or one JSON object per line.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, fmt};

/// Filter used when `RUST_LOG` is not set.
pub const DEFAULT_FILTER: &str = "info,kube_runtime=warn,kube_client=warn";

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON object per line, span fields included.
    Json,
}

/// Installs the global subscriber. `RUST_LOG` overrides [`DEFAULT_FILTER`].
///
/// A second call (for example from tests that run the controller in-process) is harmless.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let registry = tracing_subscriber::registry().with(filter);
    let result = match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    // NB: fails only when a subscriber is already installed, which is fine.
    let _ = result;
}
