//! Guests compiled in a child process (the `app-operator` binary's hidden `guest compile`,
//! `guest::compiler`): the guest renders exactly as one compiled here, with and without fuel; an
//! invalid component is refused with the child's own message; a program that cannot run falls
//! back to compiling here. The logs say which path was taken, so a silent fallback fails.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use app_operator::crd::{AppService, AppServiceSpec};
use app_operator::guest;

const BINARY: &str = env!("CARGO_BIN_EXE_app-operator");

/// A log sink for one load.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with the `app_operator` debug logs captured; returns its result and the logs.
fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("app_operator=debug")
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    (result, text)
}

fn runtime(compiler: Option<PathBuf>, fuel: Option<u64>) -> guest::Runtime {
    guest::Runtime::new(guest::Config {
        compiler,
        fuel,
        ..guest::Config::default()
    })
    .expect("a valid config")
}

fn app() -> AppService {
    let mut app = AppService::new(
        "web",
        AppServiceSpec {
            replicas: Some(2),
            image: "nginx:alpine".into(),
            ports: vec![],
        },
    );
    app.metadata.namespace = Some("shop".into());
    app
}

#[test]
fn a_guest_compiled_in_a_child_renders_as_one_compiled_here() {
    let here = runtime(None, None)
        .load_default_blocking()
        .expect("loads")
        .render_blocking(&app(), None)
        .expect("renders");
    for fuel in [None, Some(10_000_000)] {
        let child = runtime(Some(BINARY.into()), fuel);
        let (policy, logs) = logged(|| child.load_default_blocking());
        let policy = policy.expect("loads through the child");
        assert!(
            logs.contains("compiled the guest in a child process"),
            "fuel {fuel:?}: not compiled in the child: {logs}"
        );
        assert!(!logs.contains("WARN"), "fuel {fuel:?}: {logs}");
        let rendered = policy.render_blocking(&app(), None).expect("renders");
        assert_eq!(rendered, here, "fuel {fuel:?}");
    }
}

#[test]
fn an_invalid_component_is_refused_with_the_childs_message() {
    let child = runtime(Some(BINARY.into()), None);
    let (loaded, logs) = logged(|| child.load_blocking(b"\0asm\x0d\0\x01\0 not a component"));
    let Err(guest::Error::Load { source, .. }) = loaded else {
        panic!("an invalid component loaded: {logs}");
    };
    let message = source.to_string();
    assert!(
        !message.is_empty() && !message.contains("could not compile in a child process"),
        "{message}"
    );
    assert!(
        !logs.contains("compiling the guest in this process"),
        "an invalid component is not compiled again here: {logs}"
    );
}

#[test]
fn a_program_that_cannot_run_falls_back_to_compiling_here() {
    let child = runtime(Some("/nonexistent/app-operator".into()), None);
    let (policy, logs) = logged(|| child.load_default_blocking());
    policy.expect("loads, compiled here");
    assert!(
        logs.contains("compiling the guest in this process"),
        "no fallback logged: {logs}"
    );
}
