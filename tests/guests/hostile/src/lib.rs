//! A hostile guest for the sandbox and output policy tests: `metadata.name` picks what it does
//! wrong, unless the label `hostile.kudevops.io/misdeed` does (and `hostile.kudevops.io/target`
//! names the object a take-over aims at).
//!
//! Any other name renders one valid Deployment (of busybox) and no Service, so a test can check
//! that the runtime still serves the next call, the hot swap tests can let it govern
//! AppServices, and `plan` shows the deletion of the Service the default guest renders.

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
        let label = |key: &str| {
            app.metadata
                .labels
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let misdeed = label("hostile.kudevops.io/misdeed").unwrap_or(name);
        match misdeed {
            "loop" => spin(),
            "alloc" => hoard(),
            "panic" => panic!("hostile guest panics on purpose"),
            // The locked-down WASI: each reports what it got as a policy error.
            "read-file" => Err(PolicyError::Other(format!(
                "read-file: {:?}",
                std::fs::read_to_string("/etc/hostname").map_err(|e| e.kind())
            ))),
            "environment" => Err(PolicyError::Other(format!(
                "environment: {} variables, {} arguments, cwd {:?}",
                std::env::vars_os().count(),
                std::env::args_os().count(),
                std::env::current_dir().ok()
            ))),
            "socket" => Err(PolicyError::Other(format!(
                "socket: {:?}",
                std::net::TcpStream::connect("127.0.0.1:6443").map_err(|e| e.kind())
            ))),
            "clock" => {
                let start = std::time::Instant::now();
                std::thread::sleep(std::time::Duration::from_secs(3600));
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs());
                Err(PolicyError::Other(format!(
                    "clock: slept {} s, wall clock {wall:?}",
                    start.elapsed().as_secs()
                )))
            }
            "print-megabyte" => {
                use std::io::Write as _;
                let line = format!("{}\n", "p".repeat(999));
                for _ in 0..1000 {
                    let _ = std::io::stdout().write_all(line.as_bytes());
                    let _ = std::io::stderr().write_all(line.as_bytes());
                }
                Ok(vec![deployment("print-megabyte", "")])
            }
            "exit" => std::process::exit(3),
            "policy-error" => Err(PolicyError::Unsupported("hostile guest refuses".into())),
            // Renders nothing: every child of the AppService would be pruned.
            "nothing" => Ok(vec![]),
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
            // The output policy's cases: each valid for the API server, refused by the host.
            "privileged" => Ok(vec![pod(
                name,
                r#""hostNetwork":true,"hostPID":true,"volumes":[{"name":"root","hostPath":{"path":"/"}}],"#,
                r#","securityContext":{"privileged":true},"volumeMounts":[{"name":"root","mountPath":"/host"}]"#,
            )]),
            "capabilities" => Ok(vec![pod(
                name,
                "",
                r#","securityContext":{"capabilities":{"add":["SYS_ADMIN"]}}"#,
            )]),
            "host-port" => Ok(vec![pod(
                name,
                "",
                r#","ports":[{"containerPort":80,"hostPort":80}]"#,
            )]),
            "service-account" => Ok(vec![pod(name, r#""serviceAccountName":"operator","#, "")]),
            "external-ips" => Ok(vec![
                deployment(name, ""),
                service(
                    name,
                    r#""selector":{"app":"NAME"},"externalIPs":["203.0.113.7"]"#,
                ),
            ]),
            "foreign-selector" => Ok(vec![
                deployment(name, ""),
                service(name, r#""type":"NodePort","selector":{"app":"victim"}"#),
            ]),
            "load-balancer" => Ok(vec![
                deployment(name, ""),
                service(name, r#""type":"LoadBalancer","selector":{"app":"NAME"}"#),
            ]),
            "external-name" => Ok(vec![
                deployment(name, ""),
                service(
                    name,
                    r#""type":"ExternalName","externalName":"example.com""#,
                ),
            ]),
            "takeover" => Ok(vec![deployment(
                label("hostile.kudevops.io/target").unwrap_or("victim"),
                "",
            )]),
            // The server-side dry run's cases: each passes the host, the API server refuses it.
            // A selector unlike the default guest's `app: <name>`: immutable once applied.
            "selector-change" => Ok(vec![pod_labelled(
                name,
                &format!(r#"{{"app":"{name}","hostile.kudevops.io/selector":"moved"}}"#),
            )]),
            // Negative replicas: well-formed JSON, invalid for the API server's validation.
            "api-invalid" => Ok(vec![object(
                "apps/v1",
                "Deployment",
                name,
                deployment(name, "")
                    .body
                    .replace(r#""replicas":1"#, r#""replicas":-1"#),
            )]),
            "many-objects" => Ok((0..5000)
                .map(|i| service(&format!("{name}-{i}"), r#""selector":{"app":"NAME"}"#))
                .collect()),
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
    let labels = format!(r#"{{"app":"{name}"}}"#);
    let body = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"{extra_meta}}},"spec":{{"replicas":1,"selector":{{"matchLabels":{labels}}},"template":{{"metadata":{{"labels":{labels}}},"spec":{{"containers":[{{"name":"app","image":"busybox"}}]}}}}}}}}"#
    );
    object("apps/v1", "Deployment", name, body)
}

/// A Deployment of busybox whose selector and pod labels are `labels` (a JSON object).
fn pod_labelled(name: &str, labels: &str) -> DesiredObject {
    let body = format!(
        r#"{{"metadata":{{"name":"{name}"}},"spec":{{"replicas":1,"selector":{{"matchLabels":{labels}}},"template":{{"metadata":{{"labels":{labels}}},"spec":{{"containers":[{{"name":"app","image":"busybox"}}]}}}}}}}}"#
    );
    object("apps/v1", "Deployment", name, body)
}

/// A Deployment whose pod spec starts with `pod_extra` (fields and a trailing comma) and whose
/// container ends with `container_extra` (a leading comma and fields).
fn pod(name: &str, pod_extra: &str, container_extra: &str) -> DesiredObject {
    let labels = format!(r#"{{"app":"{name}"}}"#);
    let body = format!(
        r#"{{"metadata":{{"name":"{name}"}},"spec":{{"replicas":1,"selector":{{"matchLabels":{labels}}},"template":{{"metadata":{{"labels":{labels}}},"spec":{{{pod_extra}"containers":[{{"name":"app","image":"busybox"{container_extra}}}]}}}}}}}}"#
    );
    object("apps/v1", "Deployment", name, body)
}

/// A Service with one port and the spec fields `spec` (`NAME` stands for `name`).
fn service(name: &str, spec: &str) -> DesiredObject {
    let spec = spec.replace("NAME", name);
    let body =
        format!(r#"{{"metadata":{{"name":"{name}"}},"spec":{{{spec},"ports":[{{"port":80}}]}}}}"#);
    object("v1", "Service", name, body)
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
