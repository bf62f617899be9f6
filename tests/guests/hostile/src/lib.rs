//! A hostile guest for the sandbox tests: `metadata.name` picks what it does wrong.
//!
//! Any other name renders one valid Deployment, so a test can check that the runtime still
//! serves the next call.

// NB: the glue wit-bindgen generates exports C ABI symbols, which the workspace's `unsafe_code`
// lint flags; this crate has no other unsafe code.
#![allow(unsafe_code)]

wit_bindgen::generate!({ path: "../../../wit", world: "appservice-policy" });

use exports::kudevops::appservice::policy::{AppService, DesiredObject, Guest, PolicyError};
use kudevops::appservice::host::{LogLevel, log};
use std::sync::atomic::{AtomicU32, Ordering};

struct Hostile;

impl Guest for Hostile {
    fn render(app: AppService) -> Result<Vec<DesiredObject>, PolicyError> {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| std::panic::set_hook(Box::new(|i| log(LogLevel::Error, &i.to_string()))));
        static CALLS: AtomicU32 = AtomicU32::new(0);
        let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        let name = app.metadata.name.as_str();
        match name {
            "loop" => spin(),
            "alloc" => hoard(),
            "panic" => panic!("hostile guest panics on purpose"),
            "wasi" => {
                // Any WASI call must trap: the guest has no environment, clock or stdout.
                println!("hello from a sandbox");
                Ok(vec![])
            }
            "policy-error" => Err(PolicyError::Unsupported("hostile guest refuses".into())),
            "log-flood" => {
                let line = "x".repeat(10_000);
                for _ in 0..1_000 {
                    log(LogLevel::Warn, &line);
                }
                Ok(vec![deployment("log-flood", "")])
            }
            "forbidden-kind" => Ok(vec![object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                name,
                format!(r#"{{"metadata":{{"name":"{name}"}},"rules":[]}}"#),
            )]),
            "other-namespace" => Ok(vec![deployment(name, r#","namespace":"kube-system""#)]),
            "owner-reference" => Ok(vec![deployment(name, r#","ownerReferences":[]"#)]),
            "invalid-json" => Ok(vec![object(
                "apps/v1",
                "Deployment",
                name,
                "{not json".into(),
            )]),
            "bad-name" => Ok(vec![deployment("Not_A_Name", "")]),
            "mismatch" => Ok(vec![object(
                "apps/v1",
                "Deployment",
                name,
                r#"{"kind":"Service","metadata":{"name":"mismatch"}}"#.into(),
            )]),
            // A fresh instance per call means this is always `leak-1`.
            "leak" => Ok(vec![deployment(&format!("leak-{calls}"), "")]),
            "duplicate" => Ok(vec![deployment(name, ""), deployment(name, "")]),
            "oversize" => {
                let filler = "x".repeat(2 << 20);
                let body =
                    format!(r#"{{"metadata":{{"name":"{name}","labels":{{"x":"{filler}"}}}}}}"#);
                Ok(vec![object("apps/v1", "Deployment", name, body)])
            }
            _ => Ok(vec![deployment(name, "")]),
        }
    }
}

/// Never returns; only the epoch deadline (or fuel) stops it.
fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

/// Allocates 1 MiB chunks and touches them until the memory cap stops it.
fn hoard() -> ! {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        kept.push(vec![1; 1 << 20]);
        std::hint::black_box(&kept);
    }
}

fn deployment(name: &str, extra_meta: &str) -> DesiredObject {
    let body = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"{extra_meta}}},"spec":{{}}}}"#
    );
    object("apps/v1", "Deployment", name, body)
}

fn object(api_version: &str, kind: &str, name: &str, body: String) -> DesiredObject {
    DesiredObject {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        body,
    }
}

// NB: native builds (clippy) skip the export: its symbol names only link as wasm.
#[cfg(target_arch = "wasm32")]
export!(Hostile);
