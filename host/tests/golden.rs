//! Golden tests, the conformance suite of every guest: each case folder under `tests/golden/`
//! (`tests/golden/invalid/` groups the AppServices the API server refuses) holds
//! an `input.yaml` and either the `expected.yaml` that `app-operator render` prints or the
//! `expected-error.txt` it fails with, run through the production runtime and
//! `cli::conformance` (what `app-operator guest test` runs) against the compiled default guest
//! and the Python and JavaScript example guests, which must give the same output. `BLESS=1`
//! rewrites the expectations from the default guest.
//!
//! The example guests come from `make guests` (hack/guests/build.sh, run by `make test`) in
//! `target/guests/`, or `$APP_OPERATOR_GUESTS_DIR`; their compiled code is cached in a
//! `precompiled/` directory beside them, shared by every test that loads them.

use std::fs;
use std::path::Path;

mod common;

use app_operator::cli::conformance;
use app_operator::guest;
use common::guests_dir;

const GOLDEN: &str = "../tests/golden";

#[tokio::test(flavor = "multi_thread")]
async fn golden_cases_default_guest() {
    let runtime = guest::Runtime::new(guest::Config::default()).expect("default config is valid");
    let policy = runtime
        .load_default()
        .await
        .expect("the default guest loads");
    if std::env::var_os("BLESS").is_some_and(|v| v == "1") {
        bless(&policy).await;
    }
    suite(&policy).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn golden_cases_python_guest() {
    suite(&example_guest("python")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn golden_cases_javascript_guest() {
    suite(&example_guest("javascript")).await;
}

/// As many calls at once as the runtime allows (its memory budget's instances) all succeed:
/// the instance pool holds that many of the big guests.
#[tokio::test(flavor = "multi_thread")]
async fn the_big_guests_serve_every_instance_at_once() {
    for name in ["python", "javascript"] {
        let policy = example_guest(name);
        let app =
            app_operator::cli::render::read_app(Path::new(&format!("{GOLDEN}/sample/input.yaml")))
                .expect("the sample parses");
        let calls = guest::Config::default().instances();
        let renders = (0..calls).map(|_| policy.render(&app, None));
        for result in futures::future::join_all(renders).await {
            let objects = result.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(objects.len(), 2, "{name}");
        }
    }
}

/// Runs every golden case through `policy`; fails with the report of each failed case.
async fn suite(policy: &guest::Policy) {
    let cases = conformance::cases(Path::new(GOLDEN)).expect("tests/golden has cases");
    assert!(cases.len() >= 8, "expected the golden cases under {GOLDEN}");
    let mut failures = String::new();
    for case in &cases {
        let verdict = conformance::check(policy, case).await;
        if !verdict.passed() {
            failures.push_str(&verdict.report(&conformance::name(Path::new(GOLDEN), case)));
        }
    }
    assert!(
        failures.is_empty(),
        "guest {}:\n{failures}(run with BLESS=1 to accept the default guest's output)",
        policy.digest()
    );
}

async fn bless(policy: &guest::Policy) {
    for case in conformance::cases(Path::new(GOLDEN)).expect("tests/golden has cases") {
        let actual = conformance::outcome(policy, &case).await;
        fs::write(case.join(actual.file), &actual.text).expect("write expectation");
        for stale in ["expected.yaml", "expected-error.txt"] {
            if stale != actual.file {
                let _ = fs::remove_file(case.join(stale));
            }
        }
    }
}

/// Loads `target/guests/<name>.wasm` through a runtime whose precompiled cache is shared by
/// the tests; fails, saying how to build it, when it is missing.
fn example_guest(name: &str) -> guest::Policy {
    let wasm = common::example_guest(name);
    let config = guest::Config {
        cache_dir: Some(guests_dir().join("precompiled")),
        ..guest::Config::default()
    };
    let runtime = guest::Runtime::new(config).expect("valid config");
    runtime
        .load_blocking(&wasm)
        .expect("the example guest loads")
}

#[test]
fn sample_case_is_the_shipped_sample() {
    let sample = fs::read_to_string("../config/samples/apps_v1alpha1_appservice.yaml")
        .expect("sample exists");
    let case =
        fs::read_to_string(format!("{GOLDEN}/sample/input.yaml")).expect("sample case exists");
    assert_eq!(
        sample, case,
        "copy config/samples/apps_v1alpha1_appservice.yaml to tests/golden/sample/input.yaml"
    );
}
