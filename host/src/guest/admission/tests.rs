//! Unit tests of the output policy's own rules (the Pod Security checks have theirs).

use serde_json::{Value, json};

use super::*;

fn object(kind: &str, name: &str, body: Value) -> DesiredObject {
    let api_version = if kind == "Service" { "v1" } else { "apps/v1" };
    DesiredObject {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        body,
    }
}

fn deployment(pod_spec: Value) -> DesiredObject {
    object(
        "Deployment",
        "web",
        json!({"spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}, "spec": pod_spec},
        }}),
    )
}

fn plain() -> DesiredObject {
    deployment(json!({"containers": [{"name": "web", "image": "nginx"}]}))
}

fn service(spec: Value) -> DesiredObject {
    object("Service", "web", json!({ "spec": spec }))
}

fn admit_default(objects: &[DesiredObject]) -> Result<(), Refused> {
    admit(&Config::default(), Level::Baseline, objects)
}

fn rules(result: Result<(), Refused>) -> Vec<(&'static str, String)> {
    result
        .err()
        .map(|r| r.refusals.into_iter().map(|r| (r.rule, r.path)).collect())
        .unwrap_or_default()
}

#[test]
fn the_default_mapping_is_admitted() {
    let svc =
        service(json!({"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80}]}));
    assert_eq!(admit_default(&[plain(), svc]), Ok(()));
}

#[test]
fn service_types_come_from_the_allowlist_and_external_name_never() {
    let typed = |t: &str| service(json!({"type": t, "selector": {"app": "web"}}));
    for t in ["LoadBalancer", "ExternalName"] {
        assert_eq!(
            rules(admit_default(&[plain(), typed(t)])),
            [("service_type", "spec.type".to_owned())],
            "{t}"
        );
    }
    let lb = Config {
        service_types: vec!["ClusterIP".into(), "LoadBalancer".into()],
        ..Config::default()
    };
    assert_eq!(
        admit(&lb, Level::Baseline, &[plain(), typed("LoadBalancer")]),
        Ok(())
    );
    let untyped = service(json!({"selector": {"app": "web"}}));
    assert_eq!(
        admit_default(&[plain(), untyped.clone()]),
        Ok(()),
        "ClusterIP by default"
    );
    let node_port_only = Config {
        service_types: vec!["NodePort".into()],
        ..Config::default()
    };
    assert!(admit(&node_port_only, Level::Baseline, &[plain(), untyped]).is_err());
    let external_name = Config {
        service_types: vec!["ExternalName".into()],
        ..Config::default()
    };
    assert!(
        external_name.problem().is_some(),
        "no configuration allows ExternalName"
    );
    assert_eq!(Config::default().problem(), None);
}

#[test]
fn external_ips_are_refused() {
    let svc = service(json!({"selector": {"app": "web"}, "externalIPs": ["1.2.3.4"]}));
    assert_eq!(
        rules(admit_default(&[plain(), svc])),
        [("external_ips", "spec.externalIPs".to_owned())]
    );
    let empty = service(json!({"selector": {"app": "web"}, "externalIPs": []}));
    assert_eq!(admit_default(&[plain(), empty]), Ok(()));
}

#[test]
fn a_service_selects_the_pods_of_a_deployment_of_the_same_render() {
    let selecting = |selector: Value| service(json!({ "selector": selector }));
    assert_eq!(
        admit_default(&[plain(), selecting(json!({"app": "web", "tier": "front"}))]),
        Ok(())
    );
    for bad in [
        json!({"app": "other"}),
        json!({"app": "web", "tier": "back"}),
        json!({}),
        json!(null),
    ] {
        assert_eq!(
            rules(admit_default(&[plain(), selecting(bad.clone())])),
            [("service_selector", "spec.selector".to_owned())],
            "{bad}"
        );
    }
    let without_selector = service(json!({"ports": [{"port": 80}]}));
    assert!(admit_default(&[plain(), without_selector]).is_err());
    let alone = selecting(json!({"app": "web"}));
    assert!(
        admit_default(&[alone]).is_err(),
        "no Deployment in the render: nothing of its own to select"
    );
}

#[test]
fn service_accounts_come_from_the_allowlist() {
    let with = |field: &str, name: &str| {
        deployment(json!({field: name, "containers": [{"name": "web", "image": "nginx"}]}))
    };
    assert_eq!(
        admit_default(&[with("serviceAccountName", "default")]),
        Ok(())
    );
    assert_eq!(
        rules(admit_default(&[with(
            "serviceAccountName",
            "cluster-admin-sa"
        )])),
        [(
            "service_account",
            "spec.template.spec.serviceAccountName".to_owned()
        )]
    );
    assert_eq!(
        rules(admit_default(&[with("serviceAccount", "builder")])),
        [(
            "service_account",
            "spec.template.spec.serviceAccount".to_owned()
        )]
    );
    let allowed = Config {
        service_accounts: vec!["builder".into()],
        ..Config::default()
    };
    assert_eq!(
        admit(
            &allowed,
            Level::Baseline,
            &[with("serviceAccountName", "builder")]
        ),
        Ok(())
    );
}

#[test]
fn pod_security_findings_become_refusals_with_the_object_and_path() {
    let hostile = deployment(json!({
        "containers": [{"name": "web", "image": "nginx"}],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    }));
    let refused = admit_default(std::slice::from_ref(&hostile)).expect_err("hostPath at baseline");
    assert_eq!(refused.refusals[0].object, "Deployment/web");
    assert_eq!(
        refused.refusals[0].path,
        "spec.template.spec.volumes[0].hostPath"
    );
    assert_eq!(refused.refusals[0].rule, "host_path_volumes");
    assert!(
        refused
            .to_string()
            .contains("spec.template.spec.volumes[0].hostPath")
    );
    assert_eq!(
        admit(&Config::default(), Level::Privileged, &[hostile]),
        Ok(()),
        "privileged allows everything of pod security"
    );
}

#[test]
fn the_object_count_is_capped() {
    let config = Config {
        max_objects: 2,
        ..Config::default()
    };
    assert_eq!(admit_count(&config, Level::Baseline, 2), Ok(()));
    let refused = admit_count(&config, Level::Baseline, 5000).expect_err("over the cap");
    assert_eq!(refused.rules(), ["max_objects"]);
    assert!(refused.to_string().contains("5000 objects"), "{refused}");
}

#[test]
fn the_stricter_of_the_configured_and_the_namespace_level_applies() {
    let config = Config::default();
    assert_eq!(config.level(None), Level::Baseline);
    assert_eq!(config.level(Some(Level::Restricted)), Level::Restricted);
    assert_eq!(config.level(Some(Level::Privileged)), Level::Baseline);
    let labels = |value: &str| {
        std::collections::BTreeMap::from([(ENFORCE_LABEL.to_owned(), value.to_owned())])
    };
    assert_eq!(namespace_level(None), None);
    assert_eq!(namespace_level(Some(&Default::default())), None);
    assert_eq!(
        namespace_level(Some(&labels("privileged"))),
        Some(Level::Privileged)
    );
    assert_eq!(
        namespace_level(Some(&labels("bogus"))),
        Some(Level::Restricted),
        "an unknown level counts as restricted"
    );
}

#[test]
fn many_refusals_are_listed_up_to_a_bound() {
    let svc = service(json!({"type": "ExternalName", "externalIPs": ["1.1.1.1"]}));
    let many: Vec<DesiredObject> = (0..4).map(|_| svc.clone()).collect();
    let refused = admit_default(&many).expect_err("refused");
    assert_eq!(refused.refusals.len(), 12);
    assert_eq!(
        refused.rules(),
        ["service_type", "external_ips", "service_selector"]
    );
    assert!(refused.to_string().ends_with("and 7 more"), "{refused}");
}
