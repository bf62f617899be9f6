//! The API server enforces the AppService schema: invalid AppServices are rejected with a clear
//! message, before any controller sees them.

use app_operator::crd::AppService;
use app_operator_e2e::appservice::sample;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::{TestNamespace, client};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

/// `(what is wrong, spec patch, words the API server's message must contain)`.
fn invalid_cases() -> Vec<(&'static str, Value, &'static str)> {
    let port = |extra: Value| {
        let mut p = json!({"name": "http", "port": 80, "targetPort": 80});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    vec![
        (
            "negative replicas",
            json!({"replicas": -1}),
            "spec.replicas: Invalid value: -1",
        ),
        ("empty image", json!({"image": ""}), "spec.image"),
        (
            "image with spaces",
            json!({"image": "nginx alpine"}),
            "image must not be empty or contain whitespace",
        ),
        (
            "port 0",
            json!({"ports": [port(json!({"port": 0}))]}),
            "spec.ports[0].port",
        ),
        (
            "port 70000",
            json!({"ports": [port(json!({"port": 70000}))]}),
            "spec.ports[0].port",
        ),
        (
            "nodePort 80",
            json!({"ports": [port(json!({"nodePort": 80}))]}),
            "spec.ports[0].nodePort",
        ),
        (
            "nodePort 40000",
            json!({"ports": [port(json!({"nodePort": 40000}))]}),
            "spec.ports[0].nodePort",
        ),
        (
            "bad protocol",
            json!({"ports": [port(json!({"protocol": "HTTP"}))]}),
            "spec.ports[0].protocol",
        ),
        (
            "duplicate port",
            json!({"ports": [port(json!({})), port(json!({"name": "web"}))]}),
            "each port number may appear only once per protocol",
        ),
        (
            "duplicate name",
            json!({"ports": [port(json!({})), port(json!({"port": 81}))]}),
            "port names must be unique",
        ),
        (
            "unnamed ports",
            json!({"ports": [{"port": 80}, {"port": 81}]}),
            "every port must have a name when there is more than one port",
        ),
        (
            "bad targetPort name",
            json!({"ports": [port(json!({"targetPort": "Not_A_Name"}))]}),
            "spec.ports[0].targetPort",
        ),
        (
            "long targetPort name",
            json!({"ports": [port(json!({"targetPort": "a-very-long-port-name"}))]}),
            "spec.ports[0].targetPort",
        ),
        (
            "targetPort name without a letter",
            json!({"ports": [port(json!({"targetPort": "8080"}))]}),
            "spec.ports[0].targetPort",
        ),
        (
            "targetPort 0",
            json!({"ports": [port(json!({"targetPort": 0}))]}),
            "spec.ports[0].targetPort",
        ),
    ]
}

fn with_spec(name: &str, patch: &Value) -> AppService {
    let mut value = serde_json::to_value(sample()).expect("the sample serializes");
    value["metadata"]["name"] = json!(name);
    for (k, v) in patch.as_object().unwrap() {
        value["spec"][k] = v.clone();
    }
    serde_json::from_value(value).expect("still an AppService in Rust terms")
}

#[tokio::test]
async fn invalid_appservices_are_rejected_with_a_clear_message() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ns = TestNamespace::create(&client, "validation").await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    apps.create(&dry_run, &sample())
        .await
        .map_err(|e| anyhow::anyhow!("the sample must be valid: {e}"))?;

    let mut failures = Vec::new();
    for (what, patch, expected) in invalid_cases() {
        match apps.create(&dry_run, &with_spec("web", &patch)).await {
            Ok(_) => failures.push(format!("{what}: accepted")),
            Err(kube::Error::Api(status))
                if status.code == 422 && status.message.contains(expected) => {}
            Err(err) => failures.push(format!(
                "{what}: expected 422 mentioning {expected:?}, got {err}"
            )),
        }
    }
    for (name, expected) in [
        ("1st-app", "metadata.name must be a DNS-1035 label"),
        ("app.v1", "metadata.name must be a DNS-1035 label"),
    ] {
        match apps.create(&dry_run, &with_spec(name, &json!({}))).await {
            Ok(_) => failures.push(format!("name {name}: accepted")),
            Err(kube::Error::Api(status)) if status.message.contains(expected) => {}
            Err(err) => failures.push(format!("name {name}: expected {expected:?}, got {err}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    Ok(())
}
