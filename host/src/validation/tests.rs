use serde_json::json;

use super::*;

fn sample() -> Value {
    json!({
        "apiVersion": "apps.kudevops.io/v1alpha1",
        "kind": "AppService",
        "metadata": {"name": "web"},
        "spec": {"image": "nginx:alpine", "ports": [{"name": "http", "port": 80, "nodePort": 30080}]},
    })
}

fn with_spec(patch: Value) -> Value {
    let mut app = sample();
    for (k, v) in patch.as_object().unwrap() {
        app["spec"][k] = v.clone();
    }
    app
}

fn failures(object: &Value) -> Vec<String> {
    match Validator::app_service().validate(object) {
        Ok(_) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn the_sample_is_valid_and_defaulted() {
    let stored = Validator::app_service().validate(&sample()).expect("valid");
    assert_eq!(stored["spec"]["replicas"], 1);
}

#[test]
fn the_status_is_dropped_as_on_create() {
    let mut app = sample();
    app["status"] = json!({"replicas": "not even a number"});
    let stored = Validator::app_service().validate(&app).expect("valid");
    assert!(stored.get("status").is_none());
}

#[test]
fn the_cel_rules_of_the_crd_hold() {
    let ports = json!([{"name": "http", "port": 80}, {"name": "http", "port": 81}]);
    assert_eq!(
        failures(&with_spec(json!({"ports": ports}))),
        ["spec.ports: Invalid value: port names must be unique"]
    );
    assert_eq!(
        failures(&with_spec(json!({"image": "nginx alpine"}))),
        ["spec.image: Invalid value: image must not be empty or contain whitespace"]
    );
    let mut app = sample();
    app["metadata"]["name"] = json!("1st-app");
    assert_eq!(failures(&app).len(), 1, "{:?}", failures(&app));
    assert!(failures(&app)[0].starts_with("<nil>: Invalid value: metadata.name must be"));
}

#[test]
fn a_failure_of_shape_skips_the_cel_rules_as_the_api_server_does() {
    let errors = failures(&with_spec(json!({"replicas": "three", "image": "a b"})));
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("spec.replicas: Invalid value: \"string\""));
    assert!(errors[1].starts_with(".spec.replicas: Invalid value: 0"));
    assert!(errors[2].contains("some validation rules were not checked"));
}

#[test]
fn undeclared_fields_refuse_the_object_alone() {
    assert_eq!(
        failures(&with_spec(json!({"replica": 3, "image": ""}))),
        ["spec.replica: unknown field"]
    );
}

#[test]
fn a_rule_added_to_the_crd_holds_with_no_other_edit() {
    let mut crd = AppService::crd();
    let schema = crd.spec.versions[0].schema.as_mut().unwrap();
    let mut openapi = serde_json::to_value(schema.open_api_v3_schema.take()).unwrap();
    openapi["properties"]["spec"]["x-kubernetes-validations"] =
        json!([{"rule": "!has(self.replicas) || self.replicas <= 10", "message": "at most 10"}]);
    schema.open_api_v3_schema = Some(serde_json::from_value(openapi).unwrap());
    let validator = Validator::for_crd(&crd).expect("compiles");
    assert!(
        validator
            .validate(&with_spec(json!({"replicas": 10})))
            .is_ok()
    );
    let invalid = validator
        .validate(&with_spec(json!({"replicas": 11})))
        .unwrap_err();
    assert_eq!(invalid.to_string(), "spec: Invalid value: at most 10");
}

#[test]
fn a_rule_that_does_not_compile_is_refused() {
    let mut crd = AppService::crd();
    let schema = crd.spec.versions[0].schema.as_mut().unwrap();
    let mut openapi = serde_json::to_value(schema.open_api_v3_schema.take()).unwrap();
    openapi["x-kubernetes-validations"] = json!([{"rule": "self.metadata.name ==="}]);
    schema.open_api_v3_schema = Some(serde_json::from_value(openapi).unwrap());
    assert!(matches!(
        Validator::for_crd(&crd),
        Err(Error::Compile {
            what: "a CEL rule",
            ..
        })
    ));
}
