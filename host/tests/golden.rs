//! Golden tests: each folder under `tests/golden/` holds an `input.yaml` and either the
//! `expected.yaml` that `app-operator render` prints or the `expected-error.txt` it fails with,
//! rendered through the production runtime and the compiled default guest. `BLESS=1` rewrites
//! the expectations. The guest digest is written as `sha256:<default guest>`.

use std::fs;
use std::path::{Path, PathBuf};

use app_operator::cli::render;
use app_operator::guest;

const GOLDEN: &str = "../tests/golden";

/// Stands for the default guest's digest in expectations.
const DIGEST: &str = "sha256:<default guest>";

#[tokio::test(flavor = "multi_thread")]
async fn golden_cases() {
    let runtime = guest::Runtime::new(guest::Config::default()).expect("default config is valid");
    let policy = runtime.load_default().expect("the default guest loads");
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut cases: Vec<PathBuf> = fs::read_dir(GOLDEN)
        .expect("tests/golden exists")
        .map(|e| e.expect("readable golden dir").path())
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "expected the golden cases under {GOLDEN}");
    for case in &cases {
        let actual = outcome(&policy, &case.join("input.yaml")).await;
        let (file, stale) = match &actual {
            Ok(_) => ("expected.yaml", "expected-error.txt"),
            Err(_) => ("expected-error.txt", "expected.yaml"),
        };
        // NB: the digest changes with every guest or toolchain change; the mapping is what is
        // under test here.
        let actual = match actual {
            Ok(yaml) => yaml.replace(policy.digest(), DIGEST),
            Err(message) => format!("{message}\n"),
        };
        if bless {
            fs::write(case.join(file), &actual).expect("write expectation");
            let _ = fs::remove_file(case.join(stale));
            continue;
        }
        match fs::read_to_string(case.join(file)) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{}: {file} differs\n--- expected\n{expected}--- actual\n{actual}",
                case.display()
            )),
            Err(_) => failures.push(format!("{}: no {file}; actual:\n{actual}", case.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n(run with BLESS=1 to accept)",
        failures.join("\n")
    );
}

/// What `render` prints, or its one-line error as `main` prints it (without `error: `).
async fn outcome(policy: &guest::Policy, input: &Path) -> Result<String, String> {
    let result = match render::read_app(input) {
        Ok(app) => render::render(policy, &app).await,
        Err(e) => Err(e),
    };
    result.map_err(|e| format!("{:#}", anyhow::Error::from(e)))
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
