//! Unit tests of the output checks.

use serde_json::json;

use super::*;

fn kinds() -> Vec<(String, String)> {
    vec![
        ("apps/v1".into(), "Deployment".into()),
        ("v1".into(), "Service".into()),
    ]
}

fn raw(kind: &str, name: &str, body: &str) -> bindings::DesiredObject {
    let api_version = if kind == "Service" { "v1" } else { "apps/v1" };
    bindings::DesiredObject {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        body: body.into(),
    }
}

fn check(objects: Vec<bindings::DesiredObject>) -> Result<Vec<DesiredObject>, Violation> {
    let kinds = kinds();
    validate(
        objects,
        &Rules {
            allowed_kinds: &kinds,
            namespace: "web",
            max_output_bytes: 1024,
        },
    )
}

#[test]
fn fills_in_identity_fields() {
    let out = check(vec![raw("Deployment", "a", r#"{"spec":{}}"#)]).expect("valid");
    assert_eq!(
        out[0].body,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {}})
    );
}

#[test]
fn accepts_own_namespace_labels_and_annotations() {
    let body = r#"{"metadata":{"name":"a","namespace":"web","labels":{},"annotations":{}}}"#;
    assert!(check(vec![raw("Service", "a", body)]).is_ok());
    let body = r#"{"metadata":{"annotations":{"kubernetes.io/change-cause":"v2"}}}"#;
    assert!(check(vec![raw("Deployment", "a", body)]).is_ok());
}

#[test]
fn rejects_each_violation() {
    type Expect = fn(&Violation) -> bool;
    let cases: Vec<(bindings::DesiredObject, Expect)> = vec![
        (raw("ClusterRole", "a", "{}"), |v| {
            matches!(v, Violation::Kind { .. })
        }),
        (raw("Deployment", "A_b", "{}"), |v| {
            matches!(v, Violation::Name { .. })
        }),
        (raw("Service", "1abc", "{}"), |v| {
            matches!(v, Violation::Name { .. })
        }),
        (raw("Deployment", "a", "{oops"), |v| {
            matches!(v, Violation::Json { .. })
        }),
        (raw("Deployment", "a", "[]"), |v| {
            matches!(v, Violation::NotAnObject { .. })
        }),
        (raw("Deployment", "a", r#"{"metadata":3}"#), |v| {
            matches!(v, Violation::NotAnObject { .. })
        }),
        (raw("Deployment", "a", r#"{"kind":"Service"}"#), |v| {
            matches!(v, Violation::Mismatch { field: "kind", .. })
        }),
        (
            raw("Deployment", "a", r#"{"metadata":{"name":"b"}}"#),
            |v| {
                matches!(
                    v,
                    Violation::Mismatch {
                        field: "metadata.name",
                        ..
                    }
                )
            },
        ),
        (
            raw(
                "Deployment",
                "a",
                r#"{"metadata":{"namespace":"kube-system"}}"#,
            ),
            |v| matches!(v, Violation::Namespace { .. }),
        ),
        (
            raw("Deployment", "a", r#"{"metadata":{"ownerReferences":[]}}"#),
            |v| matches!(v, Violation::Metadata { field, .. } if field == "ownerReferences"),
        ),
        (
            raw(
                "Deployment",
                "a",
                r#"{"metadata":{"annotations":{"kubernetes.io/change-cause":"x","deployment.kubernetes.io/revision":"9"}}}"#,
            ),
            |v| {
                matches!(v, Violation::Annotation { key, owner: "Deployment controller", .. }
                    if key == "deployment.kubernetes.io/revision")
            },
        ),
        (
            raw(
                "Deployment",
                "a",
                &format!(r#"{{"x":"{}"}}"#, "y".repeat(2000)),
            ),
            |v| matches!(v, Violation::TooLarge { limit: 1024, .. }),
        ),
    ];
    for (object, expected) in cases {
        let what = format!(
            "{} {}",
            object.kind,
            object.body.chars().take(40).collect::<String>()
        );
        match check(vec![object]) {
            Err(v) => assert!(expected(&v), "{what}: unexpected {v:?}"),
            Ok(_) => panic!("{what}: accepted"),
        }
    }
}

#[test]
fn rejects_duplicates() {
    let err = check(vec![
        raw("Deployment", "a", "{}"),
        raw("Deployment", "a", "{}"),
    ]);
    assert!(matches!(err, Err(Violation::Duplicate { .. })));
}

#[test]
fn forbidden_kinds_cover_rbac_and_cluster_scope() {
    assert!(is_forbidden("rbac.authorization.k8s.io/v1", "Role"));
    assert!(is_forbidden("v1", "Namespace"));
    assert!(is_forbidden(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition"
    ));
    assert!(!is_forbidden("v1", "ConfigMap"));
    assert!(!is_forbidden("apps/v1", "Deployment"));
}
