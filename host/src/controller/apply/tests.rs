use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;
use crate::controller::uptodate::Fingerprint;
use crate::controller::view::{DeploymentView, ServiceView};

fn child<K: serde::de::DeserializeOwned>(kind: &str, name: &str, owner_uid: &str) -> K {
    serde_json::from_value(json!({
        "apiVersion": if kind == "Deployment" { "apps/v1" } else { "v1" },
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": format!("{name}-uid"),
            "ownerReferences": [{
                "apiVersion": "apps.kudevops.io/v1alpha1", "kind": "AppService",
                "name": "nginx", "uid": owner_uid, "controller": true,
            }],
        },
    }))
    .unwrap()
}

/// A cache listed with `objects`, as the controller's watch would fill it.
fn cache<K>(objects: Vec<K>) -> Cache<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let mut writer: Writer<K> = Writer::default();
    let owners = super::super::cache::OwnerIndex::default();
    let events = std::iter::once(Event::Init)
        .chain(objects.into_iter().map(Event::InitApply))
        .chain(std::iter::once(Event::InitDone));
    for event in events {
        writer.apply_watcher_event(&event);
        owners.apply_watcher_event(&event);
    }
    Cache::new(writer.as_reader(), owners)
}

fn children(deployments: Vec<DeploymentView>, services: Vec<ServiceView>) -> Children {
    Children {
        deployments: cache(deployments),
        services: cache(services),
        last_applied: Default::default(),
        own_writes: Default::default(),
    }
}

#[test]
fn only_controlled_children_not_emitted_are_orphans() {
    let app = AppService::test();
    let cache = children(
        vec![
            child("Deployment", "nginx", "uid-1"),
            child("Deployment", "old", "uid-1"),
        ],
        vec![
            child("Service", "nginx", "uid-1"),
            child("Service", "someone-elses", "uid-2"),
        ],
    );
    let keep = BTreeSet::from([
        (ChildKind::Deployment, "nginx"),
        (ChildKind::Service, "nginx"),
    ]);
    let found = orphans(&cache, &app, &keep);
    assert_eq!(
        found,
        vec![(
            ChildKind::Deployment,
            "old".to_owned(),
            Some("old-uid".to_owned())
        )]
    );
}

#[test]
fn a_service_named_like_a_kept_deployment_is_still_an_orphan() {
    let app = AppService::test();
    let cache = children(vec![], vec![child("Service", "nginx", "uid-1")]);
    let keep = BTreeSet::from([(ChildKind::Deployment, "nginx")]);
    assert_eq!(orphans(&cache, &app, &keep).len(), 1);
}

#[test]
fn kinds_are_recognised_by_api_version_and_kind() {
    assert_eq!(
        ChildKind::of("apps/v1", "Deployment"),
        Some(ChildKind::Deployment)
    );
    assert_eq!(ChildKind::of("v1", "Service"), Some(ChildKind::Service));
    assert_eq!(ChildKind::of("v1", "ConfigMap"), None);
    assert_eq!(ChildKind::of("extensions/v1beta1", "Deployment"), None);
}

fn meta(value: serde_json::Value) -> ObjectMeta {
    serde_json::from_value(value).expect("valid ObjectMeta")
}

#[test]
fn only_the_controller_or_an_adoption_opt_in_may_write_an_existing_child() {
    let app = AppService::test();
    let uid = app.uid().expect("the fixture has a uid");
    let ours = meta(json!({"ownerReferences": [
        {"apiVersion": "v1", "kind": "AppService", "name": "nginx", "uid": uid, "controller": true}
    ]}));
    assert_eq!(ownership(&ours, &app), Ok(()));

    let users = meta(json!({"name": "nginx"}));
    assert_eq!(
        ownership(&users, &app),
        Err("it has no controller".to_owned())
    );

    let other = meta(json!({"ownerReferences": [
        {"apiVersion": "v1", "kind": "AppService", "name": "other", "uid": "u-2", "controller": true}
    ]}));
    let owner = ownership(&other, &app).expect_err("another AppService's child");
    assert!(owner.contains("AppService other (uid u-2)"), "{owner}");

    let merely_owned = meta(json!({"ownerReferences": [
        {"apiVersion": "v1", "kind": "AppService", "name": "nginx", "uid": uid}
    ]}));
    assert!(
        ownership(&merely_owned, &app).is_err(),
        "a non-controller reference is not control"
    );

    let opted_in = meta(json!({"annotations": {ANNOTATION_ADOPT: "nginx"}}));
    assert_eq!(ownership(&opted_in, &app), Ok(()));
    let for_another = meta(json!({"annotations": {ANNOTATION_ADOPT: "web"}}));
    assert!(ownership(&for_another, &app).is_err());
    let controlled_and_annotated = meta(json!({
        "annotations": {ANNOTATION_ADOPT: "nginx"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "AppService", "name": "other", "uid": "u-2", "controller": true}],
    }));
    assert!(
        ownership(&controlled_and_annotated, &app).is_err(),
        "the annotation never takes a child from another controller"
    );
}

#[test]
fn a_precondition_is_sent_in_the_applied_metadata() {
    let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}});
    let sent = |precondition: &Precondition, body: &serde_json::Value| {
        serde_json::to_value(precondition.on(body)).expect("a body serializes")
    };
    let absent = sent(&Precondition::Absent, &body);
    assert_eq!(
        absent,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "resourceVersion": CREATE_ONLY_VERSION}})
    );
    let uid = sent(&Precondition::Uid("u-1".into()), &body);
    assert_eq!(uid["metadata"], json!({"name": "web", "uid": "u-1"}));
    let replaced = sent(
        &Precondition::Uid("u-2".into()),
        &json!({"metadata": {"name": "web", "uid": "u-1"}}),
    );
    assert_eq!(replaced, json!({"metadata": {"name": "web", "uid": "u-2"}}));
    let bare = sent(&Precondition::Absent, &json!({"kind": "Service"}));
    assert_eq!(
        bare,
        json!({"kind": "Service", "metadata": {"resourceVersion": CREATE_ONLY_VERSION}})
    );
    let odd = json!({"kind": "Service", "metadata": "x"});
    assert_eq!(sent(&Precondition::Absent, &odd), odd);
}

#[test]
fn children_are_as_last_applied_only_while_each_holds_its_body_and_none_is_left_over() {
    let app = AppService::test();
    let deployment: DeploymentView = child("Deployment", "nginx", "uid-1");
    let service: ServiceView = child("Service", "nginx", "uid-1");
    let cache = children(vec![deployment.clone()], vec![service.clone()]);
    let key = |kind| (kind, "ns".to_owned(), "nginx".to_owned());
    let (d, s) = (key(ChildKind::Deployment), key(ChildKind::Service));
    let body = json!({"spec": {}});
    assert!(
        as_last_applied(&cache, &app, &[]).is_none(),
        "the cached children are to be pruned"
    );
    cache
        .last_applied
        .applied(d.clone(), &body, deployment.fingerprint);
    cache
        .last_applied
        .applied(s.clone(), &body, service.fingerprint);
    let rendered = [d.clone(), s.clone()].map(|k| {
        let body = cache.last_applied.body(&k).expect("applied");
        (k, body)
    });

    let applied = as_last_applied(&cache, &app, &rendered).expect("as last applied");
    assert_eq!(
        applied.deployment.map(|d| d.metadata.clone()),
        Some(deployment.metadata.clone()),
        "as cached"
    );
    assert!(applied.changes.is_empty() && applied.pruned.is_empty());
    assert!(
        as_last_applied(&cache, &app, &rendered[..1]).is_none(),
        "the Service is left over"
    );

    let mut other = rendered.clone();
    other[1].0.2 = "other".into();
    assert!(
        as_last_applied(&cache, &app, &other).is_none(),
        "a child the cache does not hold"
    );

    let mut changed = service.clone();
    changed.metadata.resource_version = Some("9".into());
    cache.last_applied.applied(
        s.clone(),
        &body,
        Fingerprint::of(ChildKind::Service, &changed.metadata),
    );
    assert!(
        as_last_applied(&cache, &app, &rendered).is_none(),
        "the cached Service is not the one the apply returned"
    );
    cache.last_applied.applied(
        s.clone(),
        &json!({"spec": {"type": "NodePort"}}),
        service.fingerprint,
    );
    assert!(
        as_last_applied(&cache, &app, &rendered).is_none(),
        "another body was applied since"
    );
}
