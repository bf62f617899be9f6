//! The sandbox against a hostile guest (`tests/guests/hostile`, whose AppService name picks the
//! misdeed): each misdeed gets its specific error, and the runtime still serves the next call.

use std::io::Write;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use app_operator::crd::{AppService, AppServiceSpec};
use app_operator::guest::{self, Error, PolicyError, Violation};

const HOSTILE: &[u8] = include_bytes!(env!("APP_OPERATOR_HOSTILE_GUEST"));
const DEADLINE: Duration = Duration::from_millis(50);
const MEMORY: usize = 16 << 20;

static RUNTIME: LazyLock<guest::Runtime> = LazyLock::new(|| runtime(DEADLINE));

/// A runtime with the tests' memory limit and `deadline`.
fn runtime(deadline: Duration) -> guest::Runtime {
    let config = guest::Config {
        deadline,
        memory_limit: MEMORY,
        ..guest::Config::default()
    };
    guest::Runtime::new(config).expect("test config is valid")
}

/// The hostile guest with a deadline the output floods cannot miss on a loaded machine: they test
/// the output budgets, not the deadline (2000 writes took over 50 ms while other tests ran).
fn hostile_without_hurry() -> guest::Policy {
    load_hostile(&runtime(Duration::from_secs(10)))
}

fn app(name: &str) -> AppService {
    let mut app = AppService::new(
        name,
        AppServiceSpec {
            replicas: None,
            image: "x".into(),
            ports: vec![],
        },
    );
    app.metadata.namespace = Some("web".into());
    app
}

fn hostile() -> guest::Policy {
    load_hostile(&RUNTIME)
}

fn load_hostile(runtime: &guest::Runtime) -> guest::Policy {
    runtime
        .load_blocking(HOSTILE)
        .expect("the hostile guest loads")
}

/// Renders the misdeed `name`, then checks the same policy still serves a benign call.
async fn misbehave(name: &str) -> Error {
    let policy = hostile();
    let err = policy
        .render(&app(name), None)
        .await
        .expect_err("the misdeed must fail");
    let next = policy
        .render(&app("benign"), None)
        .await
        .expect("the runtime still serves the next call");
    assert_eq!(next[0].name, "benign");
    err
}

#[tokio::test(flavor = "multi_thread")]
async fn endless_loop_hits_the_deadline() {
    let start = Instant::now();
    let err = misbehave("loop").await;
    assert!(
        matches!(err, Error::Deadline(d) if d == DEADLINE),
        "{err:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn endless_loop_runs_out_of_fuel() {
    let config = guest::Config {
        fuel: Some(5_000_000),
        deadline: Duration::from_secs(10),
        ..guest::Config::default()
    };
    let policy = guest::Runtime::new(config)
        .expect("valid")
        .load(HOSTILE)
        .await
        .expect("loads");
    let err = policy
        .render(&app("loop"), None)
        .await
        .expect_err("must fail");
    assert!(matches!(err, Error::Fuel(5_000_000)), "{err:?}");
    policy
        .render(&app("benign"), None)
        .await
        .expect("fuel is per call");
}

#[tokio::test(flavor = "multi_thread")]
async fn allocation_bomb_hits_the_memory_cap() {
    let err = misbehave("alloc").await;
    assert!(matches!(err, Error::Memory(MEMORY)), "{err:?}");
}

/// More allocation bombs at once than the budget holds instances: every one waits for a slot and
/// hits its own cap. NB: the pool has exactly `instances` slots, so a call let past the budget
/// would fail to instantiate instead (the pool is exhausted).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_bombs_share_the_memory_budget() {
    let config = guest::Config {
        memory_limit: MEMORY,
        memory_budget: 2 * MEMORY + MEMORY / 2,
        deadline: Duration::from_secs(5),
        ..guest::Config::default()
    };
    assert_eq!(config.instances(), 2);
    let policy = guest::Runtime::new(config)
        .expect("valid")
        .load(HOSTILE)
        .await
        .expect("loads");
    let calls = (0..12).map(|_| {
        let policy = policy.clone();
        tokio::spawn(async move { policy.render(&app("alloc"), None).await })
    });
    for call in futures::future::join_all(calls).await {
        let err = call.expect("no panic").expect_err("must fail");
        assert!(matches!(err, Error::Memory(MEMORY)), "{err:?}");
    }
}

#[test]
fn a_budget_below_one_instance_is_refused() {
    let config = guest::Config {
        memory_limit: MEMORY,
        memory_budget: MEMORY - 1,
        ..guest::Config::default()
    };
    let err = guest::Runtime::new(config).err().expect("must fail");
    assert!(
        err.to_string().contains("cannot hold one instance"),
        "{err}"
    );
}

#[test]
fn memory_cap_below_the_initial_memory_fails_at_load() {
    let config = guest::Config {
        memory_limit: 64 << 10,
        ..guest::Config::default()
    };
    let err = guest::Runtime::new(config)
        .expect("valid")
        .load_default_blocking()
        .err()
        .expect("must fail");
    assert!(matches!(err, Error::Load { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn panic_is_a_trap_with_the_panic_message() {
    let err = misbehave("panic").await;
    match &err {
        Error::Trap {
            reason,
            guest_message: Some(msg),
        } => {
            assert!(reason.contains("unreachable"), "{reason}");
            assert!(msg.contains("panics on purpose"), "{msg}");
        }
        other => panic!("expected a trap with a message, got {other:?}"),
    }
    assert!(err.to_string().contains("panics on purpose"));
}

/// The report a WASI misdeed returns as its policy error.
async fn wasi_report(name: &str) -> String {
    match misbehave(name).await {
        Error::Policy(PolicyError::Other(report)) => report,
        other => panic!("expected the guest's report, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_read_finds_no_filesystem() {
    let report = wasi_report("read-file").await;
    // NB: with no preopened directory, wasi-libc finds no directory to resolve the path in.
    assert!(report.starts_with("read-file: Err("), "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_is_empty() {
    assert_eq!(
        wasi_report("environment").await,
        // NB: wasi-libc reports `/` when the host grants no initial directory.
        "environment: 0 variables, 0 arguments, cwd Some(\"/\")"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_socket_is_refused() {
    assert_eq!(wasi_report("socket").await, "socket: Err(PermissionDenied)");
}

#[tokio::test(flavor = "multi_thread")]
async fn clocks_are_virtual_and_a_sleep_returns_at_once() {
    let start = Instant::now();
    let report = wasi_report("clock").await;
    // An hour on the virtual clock, 2000-01-01T00:00:00Z on the wall clock, within a 50 ms
    // deadline.
    assert_eq!(report, "clock: slept 3600 s, wall clock Ok(946684800)");
    assert!(start.elapsed() < Duration::from_secs(60), "no real sleep");
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_is_a_trap() {
    match misbehave("exit").await {
        // NB: WASI 0.2's `exit` carries success or failure only: any non-zero code is 1.
        Error::Trap { reason, .. } => assert!(reason.contains("exit status 1"), "{reason}"),
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn a_megabyte_on_stdout_and_stderr_is_truncated() {
    let (out, text) =
        captured_logs(|| hostile_without_hurry().render_blocking(&app("print-megabyte"), None));
    out.expect("printing is not an error");
    let lines = |stream: &str| {
        text.lines()
            .filter(|l| l.contains(" guest:") && l.contains(&format!("stream=\"{stream}\"")))
            .count()
    };
    // 4 KiB of 1000-byte lines: 4 whole lines and the start of a fifth, plus one warning.
    assert_eq!(lines("stdout"), 6, "{text}");
    assert_eq!(lines("stderr"), 6, "{text}");
    assert!(
        text.contains("budget of 4096 bytes per call exhausted"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_error_is_typed() {
    let err = misbehave("policy-error").await;
    assert!(
        matches!(err, Error::Policy(PolicyError::Unsupported(_))),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_outputs_are_refused() {
    type Expect = fn(&Violation) -> bool;
    let cases: [(&str, Expect); 8] = [
        (
            "forbidden-kind",
            |v| matches!(v, Violation::Kind { kind, .. } if kind == "ClusterRole"),
        ),
        ("other-namespace", |v| {
            matches!(v, Violation::Namespace { .. })
        }),
        ("owner-reference", |v| {
            matches!(v, Violation::Metadata { .. })
        }),
        ("invalid-json", |v| matches!(v, Violation::Json { .. })),
        ("oversize", |v| matches!(v, Violation::TooLarge { .. })),
        ("bad-name", |v| matches!(v, Violation::Name { .. })),
        ("mismatch", |v| {
            matches!(v, Violation::Mismatch { field: "kind", .. })
        }),
        ("duplicate", |v| matches!(v, Violation::Duplicate { .. })),
    ];
    for (name, expected) in cases {
        match misbehave(name).await {
            Error::InvalidOutput(v) => assert!(expected(&v), "{name}: unexpected {v:?}"),
            other => panic!("{name}: expected invalid output, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn output_the_host_refuses_is_refused_with_the_rule_and_field() {
    let cases = [
        (
            "privileged",
            "host_namespaces",
            "spec.template.spec.hostNetwork",
        ),
        (
            "capabilities",
            "capabilities",
            "spec.template.spec.containers[0].securityContext.capabilities.add[0]",
        ),
        (
            "host-port",
            "host_ports",
            "spec.template.spec.containers[0].ports[0].hostPort",
        ),
        (
            "service-account",
            "service_account",
            "spec.template.spec.serviceAccountName",
        ),
        ("external-ips", "external_ips", "spec.externalIPs"),
        ("foreign-selector", "service_selector", "spec.selector"),
        ("load-balancer", "service_type", "spec.type"),
        ("external-name", "service_type", "spec.type"),
        ("many-objects", "max_objects", ""),
    ];
    for (misdeed, rule, path) in cases {
        let err = misbehave(misdeed).await;
        let Error::Refused(refused) = &err else {
            panic!("{misdeed}: expected a refusal, got {err}");
        };
        let first = &refused.refusals[0];
        assert_eq!(
            (first.rule, first.path.as_str()),
            (rule, path),
            "{misdeed}: {err}"
        );
        assert_eq!(err.kind(), "refused");
    }
    let hostile = hostile();
    let restricted = guest::Runtime::new(guest::Config {
        output: guest::admission::Config {
            pod_security: guest::admission::Level::Restricted,
            ..guest::admission::Config::default()
        },
        ..guest::Config::default()
    })
    .expect("valid config")
    .load(HOSTILE)
    .await
    .expect("loads");
    hostile
        .render(&app("benign"), None)
        .await
        .expect("a plain pod meets baseline");
    let configured = restricted.render(&app("benign"), None).await;
    let by_namespace = hostile
        .render(&app("benign"), Some(guest::admission::Level::Restricted))
        .await;
    for (how, result) in [("configured", configured), ("namespace", by_namespace)] {
        let err = result.expect_err("a plain pod fails restricted");
        assert!(matches!(err, Error::Refused(_)), "{how}: {err}");
    }
}

#[test]
fn every_call_gets_a_fresh_instance() {
    let policy = hostile();
    for _ in 0..3 {
        let out = policy.render_blocking(&app("leak"), None).expect("renders");
        assert_eq!(out[0].name, "leak-1", "state leaked between calls");
    }
}

#[test]
fn guest_logs_are_truncated_and_budgeted() {
    let (out, text) =
        captured_logs(|| hostile_without_hurry().render_blocking(&app("log-flood"), None));
    out.expect("a log flood is not an error");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" guest:")).collect();
    assert_eq!(lines.len(), 33, "32 lines and one budget warning:\n{text}");
    assert!(lines.iter().all(|l| l.len() < 1300), "lines are truncated");
    assert!(lines[32].contains("log budget"), "{}", lines[32]);
}

/// Runs `f` with every `tracing` event captured as text; returns its result and the text.
fn captured_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    let captured = Arc::new(Mutex::new(Vec::new()));
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || Sink(sink.clone()))
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text =
        String::from_utf8(captured.lock().expect("not poisoned").clone()).expect("utf-8 logs");
    (out, text)
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_calls_beyond_the_pool_wait_instead_of_failing() {
    let policy = RUNTIME.load_default().await.expect("loads");
    let calls = (0..300).map(|i| {
        let policy = policy.clone();
        tokio::spawn(async move { policy.render(&app(&format!("app-{i}")), None).await })
    });
    for call in futures::future::join_all(calls).await {
        call.expect("task ran").expect("every call succeeds");
    }
}

#[test]
fn precompiled_guests_are_cached_on_disk() {
    let dir = std::env::temp_dir().join(format!("app-operator-cache-test-{}", std::process::id()));
    let config = guest::Config {
        cache_dir: Some(dir.clone()),
        ..guest::Config::default()
    };
    let first = guest::Runtime::new(config.clone())
        .expect("valid")
        .load_default_blocking()
        .expect("compiles");
    let artifacts: Vec<_> = std::fs::read_dir(&dir)
        .expect("cache dir created")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let second = guest::Runtime::new(config.clone())
        .expect("valid")
        .load_default_blocking()
        .expect("loads from cache");
    assert_eq!(first.digest(), second.digest());
    second
        .render_blocking(&app("nginx"), None)
        .expect("precompiled guest renders");
    // A corrupt artifact costs a compile, not an error.
    std::fs::write(&artifacts[0], b"garbage").expect("overwrite artifact");
    let third = guest::Runtime::new(config)
        .expect("valid")
        .load_default_blocking()
        .expect("recompiles");
    third.render_blocking(&app("nginx"), None).expect("renders");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// A compiler program that refuses every guest as the real one refuses an invalid component
/// (exit code 3): a load that compiles with it fails.
#[cfg(unix)]
fn refusing_compiler(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let program = dir.join("refuse");
    std::fs::create_dir_all(dir).expect("create dir");
    std::fs::write(&program, "#!/bin/sh\necho refused >&2\nexit 3\n").expect("write script");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    program
}

#[cfg(unix)]
#[test]
fn a_guest_precompiled_ahead_of_time_loads_without_a_compile() {
    let dir = std::env::temp_dir().join(format!(
        "app-operator-precompiled-test-{}",
        std::process::id()
    ));
    let artifacts = dir.join("guests");
    let refuse = refusing_compiler(&dir);
    let path = guest::Runtime::new(guest::Config::default())
        .expect("valid")
        .precompile(guest::default_guest(), &artifacts)
        .expect("precompiles");
    assert_eq!(path.parent(), Some(artifacts.as_path()));
    let compile_refused = guest::Config {
        compiler: Some(refuse),
        ..guest::Config::default()
    };
    let err = guest::Runtime::new(compile_refused.clone())
        .expect("valid")
        .load_default_blocking()
        .err()
        .expect("a compile fails with this compiler");
    assert!(matches!(err, Error::Load { .. }), "{err:?}");

    let precompiled = guest::Config {
        precompiled_dir: Some(artifacts.clone()),
        ..compile_refused.clone()
    };
    let policy = guest::Runtime::new(precompiled.clone())
        .expect("valid")
        .load_default_blocking()
        .expect("loads the precompiled artifact");
    let rendering = policy
        .render_blocking(&app("nginx"), None)
        .expect("renders");
    let compiled = RUNTIME
        .load_default_blocking()
        .expect("loads")
        .render_blocking(&app("nginx"), None)
        .expect("renders");
    assert_eq!(
        rendering, compiled,
        "the same objects as the guest compiled here"
    );
    let files = std::fs::read_dir(&artifacts).expect("dir").count();
    assert_eq!(files, 1, "nothing written beside the precompiled artifact");

    // Another engine (fuel changes the compiled code) finds no artifact of its own: it compiles.
    let metered = guest::Config {
        fuel: Some(10_000_000),
        ..precompiled.clone()
    };
    let err = guest::Runtime::new(metered)
        .expect("valid")
        .load_default_blocking()
        .err()
        .expect("no artifact for a metered engine");
    assert!(matches!(err, Error::Load { .. }), "{err:?}");

    // A corrupt artifact costs a compile, not an error.
    std::fs::write(&path, b"garbage").expect("overwrite artifact");
    guest::Runtime::new(guest::Config {
        compiler: None,
        ..precompiled
    })
    .expect("valid")
    .load_default_blocking()
    .expect("compiles instead")
    .render_blocking(&app("nginx"), None)
    .expect("renders");

    // Bytes that are no guest are refused, and nothing is written.
    let err = guest::Runtime::new(guest::Config::default())
        .expect("valid")
        .precompile(b"\0asm not really", &dir.join("none"))
        .expect_err("must fail");
    assert!(matches!(err, Error::Load { .. }), "{err:?}");
    assert!(!dir.join("none").exists());
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn bad_bytes_fail_to_load() {
    let err = RUNTIME
        .load_blocking(b"\0asm not really")
        .err()
        .expect("must fail");
    assert!(matches!(err, Error::Load { .. }), "{err:?}");
    assert_eq!(err.kind(), "load");
}

#[test]
fn forbidden_kinds_cannot_be_allowed() {
    let mut config = guest::Config::default();
    config.allowed_kinds.push((
        "rbac.authorization.k8s.io/v1".into(),
        "ClusterRoleBinding".into(),
    ));
    assert!(matches!(guest::Runtime::new(config), Err(Error::Config(_))));
}

#[test]
fn inspect_reports_world_and_granted_and_denied_imports() {
    let i = RUNTIME
        .inspect_blocking(guest::default_guest())
        .expect("inspects");
    assert_eq!(
        i.world.as_deref(),
        Some("kudevops:appservice/appservice-policy@0.1.0")
    );
    // NB: the default guest resolves std's WASI imports to traps (guest/src/no_wasi.rs) and
    // calls no host function (guest/src/lib.rs): each import would cost every fresh instance;
    // only the contract's `types` interface (types, no functions) is left. The hostile guest, a
    // plain Rust std guest, still imports WASI and `host.log`.
    assert!(
        i.imports
            .iter()
            .all(|m| m.name.starts_with("kudevops:appservice/types@")),
        "the default guest imports no function: {:?}",
        i.imports
    );
    let i = RUNTIME.inspect_blocking(HOSTILE).expect("inspects");
    let import = |prefix: &str| {
        i.imports
            .iter()
            .find(|m| m.name.starts_with(prefix))
            .unwrap_or_else(|| panic!("the hostile guest imports {prefix}: {:?}", i.imports))
    };
    assert!(import("kudevops:appservice/host@").granted);
    let stdout = import("wasi:cli/stdout@");
    assert!(
        stdout.granted && stdout.how.contains("guest log"),
        "{stdout:?}"
    );
    assert!(!import("wasi:cli/stdin@").granted);
    assert!(!import("wasi:cli/terminal-stdout@").granted);
}
