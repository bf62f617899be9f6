//! `app-operator guest test`: the conformance suite, a directory of cases run through a guest.
//!
//! A case is a directory with an `input.yaml` (an AppService) and either the `expected.yaml`
//! that `render` prints for it or the `expected-error.txt` it fails with (the error and its
//! causes on one line). Before the comparison the guest's digest is written as
//! [`DIGEST_PLACEHOLDER`] and the input's path as `input.yaml`, so one set of cases holds for
//! every guest that implements the same mapping: the project's golden cases (`tests/golden/`)
//! run against the Rust, Python and JavaScript guests alike.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use similar::TextDiff;

use super::render;
use crate::guest;
use crate::{Error, Result};

/// Stands for the guest's digest in expectations.
pub const DIGEST_PLACEHOLDER: &str = "sha256:<guest>";

/// Arguments of `app-operator guest test`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The guest component (`.wasm`, or a pinned OCI reference) under test; unset tests the
    /// embedded default guest.
    #[arg(long)]
    pub guest: Option<PathBuf>,
    /// The cases: one directory per case, each with `input.yaml` and `expected.yaml` or
    /// `expected-error.txt`.
    #[arg(default_value = "tests/golden")]
    pub cases: PathBuf,
    /// Directory for precompiled guests; unset compiles in memory every run.
    #[arg(long, env = "APP_OPERATOR_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The output policy, as the operator's flags set it.
    #[command(flatten)]
    pub policy: super::PolicyArgs,
    /// How to reach the registry, for a guest given by reference.
    #[command(flatten)]
    pub registry: super::registry::RegistryArgs,
}

/// Runs the subcommand: one line per case, a unified diff under each failure, a summary line;
/// fails when a case does.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let policy = render::local_policy(
        args.cache_dir,
        &args.policy,
        args.guest.as_deref(),
        &args.registry,
    )
    .await?;
    let cases = cases(&args.cases)?;
    let mut failed = 0;
    for case in &cases {
        let verdict = check(&policy, case).await;
        print!("{}", verdict.report(&name(&args.cases, case)));
        failed += usize::from(!verdict.passed());
    }
    println!("{} passed, {failed} failed", cases.len() - failed);
    match failed {
        0 => Ok(()),
        n => Err(Error::Input(format!(
            "{n} of {} cases failed for guest {}",
            cases.len(),
            policy.digest()
        ))),
    }
}

/// The case directories under `dir` (those with an `input.yaml`), sorted; a directory without
/// one groups cases (`tests/golden/invalid/`) and is searched in turn.
pub fn cases(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut cases = Vec::new();
    collect(dir, &mut cases)?;
    cases.sort();
    if cases.is_empty() {
        return Err(Error::Input(format!(
            "no cases under {}: each case is a directory with an input.yaml",
            dir.display()
        )));
    }
    Ok(cases)
}

fn collect(dir: &Path, cases: &mut Vec<PathBuf>) -> Result<()> {
    let read = |source| Error::Read {
        path: dir.to_owned(),
        source,
    };
    for entry in fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        if path.join("input.yaml").is_file() {
            cases.push(path);
        } else if path.is_dir() {
            collect(&path, cases)?;
        }
    }
    Ok(())
}

/// What a guest makes of a case: the file it is compared with and its expected content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `expected.yaml` or `expected-error.txt`.
    pub file: &'static str,
    /// The normalised output (or error line, ending with a newline).
    pub text: String,
    /// Whether the input itself is refused (the API server would refuse it), so the guest was
    /// not called.
    pub invalid_input: bool,
}

/// Renders the case's input through `policy`, normalised for comparison.
pub async fn outcome(policy: &guest::Policy, case: &Path) -> Outcome {
    let input = case.join("input.yaml");
    let result = match render::read_app(&input) {
        Ok(app) => render::render(policy, &app).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(yaml) => Outcome {
            file: "expected.yaml",
            text: yaml.replace(policy.digest(), DIGEST_PLACEHOLDER),
            invalid_input: false,
        },
        Err(e) => {
            let invalid_input = matches!(e, Error::InvalidApp { .. });
            let message = format!("{:#}", anyhow::Error::from(e));
            Outcome {
                file: "expected-error.txt",
                text: format!(
                    "{}\n",
                    message.replace(&input.display().to_string(), "input.yaml")
                ),
                invalid_input,
            }
        }
    }
}

/// How a case went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The outcome is the expectation.
    Pass,
    /// The outcome differs; `diff` is a unified diff from the expectation to it.
    Differs {
        /// The expectation compared with.
        file: &'static str,
        /// Expected to actual, unified.
        diff: String,
    },
    /// No expectation of the outcome's kind (e.g. an error where objects were expected).
    Missing {
        /// The outcome.
        actual: Outcome,
    },
}

impl Verdict {
    /// Whether the case passed.
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Pass)
    }

    /// `ok   <case>`, or `FAIL <case>` and what differs.
    pub fn report(&self, case: &str) -> String {
        match self {
            Verdict::Pass => format!("ok   {case}\n"),
            Verdict::Differs { file, diff } => format!("FAIL {case}: differs from {file}\n{diff}"),
            Verdict::Missing { actual } => {
                let mut out = match actual.invalid_input {
                    true => format!(
                        "FAIL {case}: the input is not a valid AppService (the cluster would \
                         refuse it), so the guest was not called:\n"
                    ),
                    false => format!("FAIL {case}: no {}; the guest gave:\n", actual.file),
                };
                for line in actual.text.lines() {
                    let _ = writeln!(out, "    {line}");
                }
                out
            }
        }
    }
}

/// Runs one case and compares its outcome with the expectation.
pub async fn check(policy: &guest::Policy, case: &Path) -> Verdict {
    let actual = outcome(policy, case).await;
    compare(&actual, fs::read_to_string(case.join(actual.file)).ok())
}

/// Compares an outcome with the expectation of its kind, if there is one.
pub fn compare(actual: &Outcome, expected: Option<String>) -> Verdict {
    match expected {
        Some(expected) if expected == actual.text => Verdict::Pass,
        Some(expected) => Verdict::Differs {
            file: actual.file,
            diff: TextDiff::from_lines(&expected, &actual.text)
                .unified_diff()
                .context_radius(3)
                .header(actual.file, "actual")
                .to_string(),
        },
        None => Verdict::Missing {
            actual: actual.clone(),
        },
    }
}

/// The case's name: its directory under `root` (`invalid/empty-image`).
pub fn name(root: &Path, case: &Path) -> String {
    case.strip_prefix(root)
        .unwrap_or(case)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Outcome {
        Outcome {
            file: "expected.yaml",
            text: text.into(),
            invalid_input: false,
        }
    }

    #[test]
    fn a_difference_is_a_readable_unified_diff() {
        let verdict = compare(
            &yaml("kind: Service\nspec:\n  replicas: 2\n"),
            Some("kind: Service\nspec:\n  replicas: 1\n".into()),
        );
        assert!(!verdict.passed());
        let report = verdict.report("sample");
        assert!(
            report.starts_with("FAIL sample: differs from expected.yaml\n"),
            "{report}"
        );
        assert!(
            report.contains("--- expected.yaml\n+++ actual\n"),
            "{report}"
        );
        assert!(
            report.contains("-  replicas: 1\n+  replicas: 2\n"),
            "{report}"
        );
    }

    #[test]
    fn an_invalid_input_is_reported_as_such() {
        let invalid = Outcome {
            file: "expected-error.txt",
            text: "input.yaml is not a valid AppService: spec.image: Required value\n".into(),
            invalid_input: true,
        };
        let report = compare(&invalid, None).report("typo");
        assert!(
            report.starts_with("FAIL typo: the input is not a valid AppService"),
            "{report}"
        );
        assert!(report.contains("    input.yaml is not a valid AppService: spec.image"));
    }

    #[test]
    fn the_same_text_passes_and_a_missing_expectation_fails() {
        assert_eq!(compare(&yaml("a\n"), Some("a\n".into())), Verdict::Pass);
        assert_eq!(Verdict::Pass.report("x"), "ok   x\n");
        let missing = compare(&yaml("a\n"), None);
        assert_eq!(
            missing.report("x"),
            "FAIL x: no expected.yaml; the guest gave:\n    a\n"
        );
    }
}
