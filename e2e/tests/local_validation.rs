//! Local checks are the cluster's checks: every AppService of the golden cases (`tests/golden/`,
//! the valid ones and the corpus of invalid ones under `tests/golden/invalid/`) gets the same
//! verdict from `app-operator`'s local validation (what `render`, `plan` and `guest test` run)
//! as from the API server, sent as a server-side dry-run create with strict field validation
//! (kubectl's default): accepted by both, or refused by both naming the same fields.

use std::collections::BTreeSet;
use std::path::Path;

use app_operator::cli::conformance;
use app_operator::validation::Validator;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::{TestNamespace, client};
use kube::Client;
use serde_json::Value;

const GOLDEN: &str = "../tests/golden";

/// What one side says of an object: `None` when accepted, else the fields named (`""` for the
/// object itself, the API server's `<nil>`).
type Verdict = Option<BTreeSet<String>>;

#[tokio::test]
async fn local_verdicts_are_the_api_servers() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ns = TestNamespace::create(&client, "local-validation").await?;
    let root = Path::new(GOLDEN);
    let (mut refused, mut accepted, mut mismatches) = (0, 0, Vec::new());
    for case in conformance::cases(root)? {
        let name = conformance::name(root, &case);
        let text = std::fs::read_to_string(case.join("input.yaml"))?;
        let mut object: Value = serde_yaml_ng::from_str(&text)?;
        if object["kind"] != "AppService" {
            continue; // not-an-appservice: refused before any validation, by kind
        }
        object["metadata"]["namespace"] = Value::from(ns.name());
        let local: Verdict = Validator::app_service()
            .validate(&object)
            .err()
            .map(|invalid| invalid.errors.into_iter().map(|e| e.path).collect());
        let server = server_verdict(&client, ns.name(), &object).await?;
        match (&local, &server) {
            (None, None) => accepted += 1,
            (Some(_), Some(_)) if local == server => refused += 1,
            _ => mismatches.push(format!("{name}: local {local:?}, API server {server:?}")),
        }
    }
    assert!(mismatches.is_empty(), "{mismatches:#?}");
    assert!(refused >= 20, "only {refused} invalid cases");
    assert!(accepted >= 8, "only {accepted} valid cases");
    eprintln!("{refused} refused and {accepted} accepted alike");
    Ok(())
}

/// The API server's verdict on creating `object` in `ns` (a dry run: nothing is stored).
async fn server_verdict(client: &Client, ns: &str, object: &Value) -> anyhow::Result<Verdict> {
    let url = format!(
        "/apis/apps.kudevops.io/v1alpha1/namespaces/{ns}/appservices?dryRun=All&fieldValidation=Strict"
    );
    let request = http::Request::post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(object)?)?;
    match client.request::<Value>(request).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let causes = status.details.map(|d| d.causes).unwrap_or_default();
            let fields = causes
                .into_iter()
                .map(|c| match c.field.as_str() {
                    "<nil>" => String::new(),
                    _ => c.field,
                })
                .collect();
            Ok(Some(fields))
        }
        // NB: strict field validation answers 400 with the fields in the message only:
        // `strict decoding error: unknown field "spec.replica", unknown field "..."`.
        Err(kube::Error::Api(status)) if status.code == 400 => Ok(Some(
            status
                .message
                .split("unknown field \"")
                .skip(1)
                .filter_map(|rest| rest.split('"').next())
                .map(str::to_owned)
                .collect(),
        )),
        Err(err) => Err(err.into()),
    }
}
