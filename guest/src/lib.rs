//! The default app-operator policy: an AppService becomes a Deployment and a NodePort Service.
//!
//! This file only binds the contract; the mapping lives in plain functions in [`render`].

// NB: the glue wit-bindgen generates exports C ABI symbols, which the workspace's `unsafe_code`
// lint flags; the modules below deny unsafe code again.
#![allow(unsafe_code)]

mod objects;
pub mod render;

wit_bindgen::generate!({ path: "../wit", world: "appservice-policy" });

use exports::kudevops::appservice::policy::{AppService, DesiredObject, Guest, PolicyError};
use kudevops::appservice::host::{LogLevel, log};

/// The default policy.
struct DefaultPolicy;

impl Guest for DefaultPolicy {
    fn render(app: AppService) -> Result<Vec<DesiredObject>, PolicyError> {
        route_panics_to_log();
        let objects = render::render(&app)?;
        log(LogLevel::Debug, &render::summary(&objects));
        Ok(objects)
    }
}

/// Sends panic messages to the host's log: the sandbox has no stderr, and the host reports the
/// last error line with the trap.
fn route_panics_to_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| log(LogLevel::Error, &info.to_string())))
    });
}

// NB: native builds (unit tests, clippy) skip the export: its symbol names only link as wasm.
#[cfg(target_arch = "wasm32")]
export!(DefaultPolicy);
