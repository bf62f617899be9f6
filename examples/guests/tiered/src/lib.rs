//! An example policy, visibly different from the default one: every pod gets a
//! `app.kudevops.io/tier` label (`web` when the AppService has ports, else `worker`) and
//! resource requests of 50m CPU and 64Mi memory; the Service is a ClusterIP one unless a
//! nodePort is given. Used by the hot swap tests and the README.

// NB: the glue wit-bindgen generates exports C ABI symbols, which the workspace's `unsafe_code`
// lint flags; this crate has no other unsafe code.
#![allow(unsafe_code)]

mod render;

wit_bindgen::generate!({ path: "../../../wit", world: "appservice-policy" });

use exports::kudevops::appservice::policy::{AppService, DesiredObject, Guest, PolicyError};

struct Tiered;

impl Guest for Tiered {
    fn render(app: AppService) -> Result<Vec<DesiredObject>, PolicyError> {
        render::render(&app)
    }
}

// NB: native builds (unit tests, clippy) skip the export: its symbol names only link as wasm.
#[cfg(target_arch = "wasm32")]
export!(Tiered);
