//! Unit tests of the mapping, run natively.

use serde_json::{Value, json};

use super::*;
use crate::bindings::kudevops::appservice::types::{AppServiceSpec, ObjectMeta};

fn app(replicas: Option<i32>, ports: Vec<SpecPort>) -> AppService {
    AppService {
        metadata: ObjectMeta {
            name: "nginx".into(),
            namespace: Some("web".into()),
            uid: None,
            generation: None,
            labels: vec![],
            annotations: vec![],
        },
        spec: AppServiceSpec {
            replicas,
            image: "nginx:alpine".into(),
            ports,
        },
    }
}

fn port(name: Option<&str>, port: i32, target: Option<IntOrString>, node: Option<i32>) -> SpecPort {
    SpecPort {
        name: name.map(Into::into),
        protocol: None,
        port,
        target_port: target,
        node_port: node,
        app_protocol: None,
    }
}

fn bodies(app: &AppService) -> Vec<Value> {
    render(app)
        .expect("fixture is valid")
        .iter()
        .map(|o| serde_json::from_str(&o.body).expect("guest emits JSON"))
        .collect()
}

fn invalid(app: &AppService) -> String {
    match render(app) {
        Err(PolicyError::InvalidSpec(msg)) => msg,
        other => panic!("expected invalid-spec, got {other:?}"),
    }
}

#[test]
fn sample_renders_deployment_and_nodeport_service() {
    let sample = app(
        Some(3),
        vec![port(
            Some("http"),
            80,
            Some(IntOrString::Int(80)),
            Some(30080),
        )],
    );
    let objects = render(&sample).expect("sample is valid");
    let ids: Vec<_> = objects
        .iter()
        .map(|o| (o.api_version.as_str(), o.kind.as_str()))
        .collect();
    assert_eq!(ids, [("apps/v1", "Deployment"), ("v1", "Service")]);
    let b = bodies(&sample);
    assert_eq!(
        b[0],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                {"name": "nginx", "image": "nginx:alpine", "imagePullPolicy": "IfNotPresent",
                 "ports": [{"containerPort": 80}],
                 "securityContext": {"allowPrivilegeEscalation": false}}]}}}})
    );
    assert_eq!(
        b[1],
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"},
            "spec": {"type": "NodePort", "selector": {"app": "nginx"},
            "ports": [{"name": "http", "port": 80, "targetPort": 80, "nodePort": 30080}]}})
    );
}

#[test]
fn restricted_pods_on_request_run_as_non_root_without_capabilities() {
    let mut restricted = app(None, vec![]);
    restricted.metadata.annotations = vec![(POD_SECURITY_ANNOTATION.into(), "restricted".into())];
    let pod = &bodies(&restricted)[0]["spec"]["template"]["spec"];
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        pod["containers"][0]["securityContext"],
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
    );
    let mut baseline = app(None, vec![]);
    baseline.metadata.annotations = vec![(POD_SECURITY_ANNOTATION.into(), "baseline".into())];
    assert_eq!(
        bodies(&baseline)[0]["spec"]["template"]["spec"]["securityContext"],
        json!({"seccompProfile": {"type": "RuntimeDefault"}})
    );
    let mut bogus = app(None, vec![]);
    bogus.metadata.annotations = vec![(POD_SECURITY_ANNOTATION.into(), "strict".into())];
    assert!(invalid(&bogus).contains(POD_SECURITY_ANNOTATION));
}

#[test]
fn omitted_replicas_means_one() {
    assert_eq!(bodies(&app(None, vec![]))[0]["spec"]["replicas"], 1);
}

#[test]
fn no_ports_means_no_service_and_no_container_ports() {
    let b = bodies(&app(Some(2), vec![]));
    assert_eq!(b.len(), 1);
    assert!(
        b[0]["spec"]["template"]["spec"]["containers"][0]
            .get("ports")
            .is_none()
    );
}

#[test]
fn omitted_target_port_defaults_to_port() {
    let b = bodies(&app(None, vec![port(None, 8080, None, None)]));
    assert_eq!(
        b[0]["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 8080}])
    );
    assert_eq!(
        b[1]["spec"]["ports"],
        json!([{"port": 8080, "targetPort": 8080}])
    );
}

#[test]
fn named_target_port_names_the_container_port() {
    let p = port(Some("http"), 80, Some(IntOrString::Str("web".into())), None);
    let b = bodies(&app(None, vec![p]));
    assert_eq!(
        b[0]["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"name": "web", "containerPort": 80}])
    );
    assert_eq!(b[1]["spec"]["ports"][0]["targetPort"], "web");
    assert!(b[1]["spec"]["ports"][0].get("nodePort").is_none());
}

#[test]
fn shared_targets_give_one_container_port() {
    let ports = vec![
        port(Some("a"), 80, Some(IntOrString::Int(8080)), None),
        port(Some("b"), 81, Some(IntOrString::Int(8080)), None),
    ];
    let b = bodies(&app(None, ports));
    assert_eq!(
        b[0]["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 8080}])
    );
    assert_eq!(b[1]["spec"]["ports"].as_array().map(Vec::len), Some(2));
}

#[test]
fn protocol_and_app_protocol_pass_through() {
    let mut p = port(None, 53, None, None);
    p.protocol = Some("UDP".into());
    p.app_protocol = Some("dns".into());
    let b = bodies(&app(None, vec![p]));
    assert_eq!(
        b[0]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"],
        "UDP"
    );
    assert_eq!(b[1]["spec"]["ports"][0]["appProtocol"], "dns");
}

#[test]
fn invalid_specs_name_the_field() {
    let mut a = app(None, vec![]);
    a.spec.image = " ".into();
    assert!(invalid(&a).starts_with("spec.image"));
    assert!(invalid(&app(Some(-1), vec![])).starts_with("spec.replicas"));
    assert!(invalid(&app(None, vec![port(None, 0, None, None)])).starts_with("spec.ports[0].port"));
    let bad_target = port(None, 80, Some(IntOrString::Int(70000)), None);
    assert!(invalid(&app(None, vec![bad_target])).starts_with("spec.ports[0].targetPort"));
    let unnamed = vec![port(Some("a"), 80, None, None), port(None, 81, None, None)];
    assert!(invalid(&app(None, unnamed)).starts_with("spec.ports[1].name"));
    let mut nameless = app(None, vec![]);
    nameless.metadata.name.clear();
    assert!(invalid(&nameless).starts_with("metadata.name"));
}

#[test]
fn port_names_follow_iana_rules() {
    for ok in ["web", "http-alt", "h2c", "a1234567890bcde"] {
        assert!(is_port_name(ok), "{ok}");
    }
    for bad in [
        "",
        "8080",
        "Web",
        "-web",
        "web-",
        "we--b",
        "a1234567890bcdef",
    ] {
        assert!(!is_port_name(bad), "{bad}");
    }
}
