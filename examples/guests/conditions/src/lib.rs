//! An example policy on contract `kudevops:appservice@0.2.0`: a Deployment and a Service, plus
//! an `ImagePinned` condition (True when the image is pinned by digest) and, when it is not, a
//! Warning Event `ImageNotPinned`. Used by the 0.1.0/0.2.0 side-by-side tests and the guide.

// NB: the glue wit-bindgen generates exports C ABI symbols, which the workspace's `unsafe_code`
// lint flags; this crate has no other unsafe code.
#![allow(unsafe_code)]

mod render;

wit_bindgen::generate!({ path: "../../../wit/0.2.0", world: "appservice-policy" });

use exports::kudevops::appservice::policy::{AppService, Guest, PolicyError, Rendering};

struct Conditions;

impl Guest for Conditions {
    fn render(app: AppService) -> Result<Rendering, PolicyError> {
        render::render(&app)
    }
}

// NB: native builds (unit tests, clippy) skip the export: its symbol names only link as wasm.
#[cfg(target_arch = "wasm32")]
export!(Conditions);
