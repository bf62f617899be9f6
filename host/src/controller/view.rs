//! The controller's view of its children: the parts of a live Deployment or Service it reads,
//! parsed from the full object (watch events, apply answers) with everything else skipped.
//!
//! The controller reads a child's metadata (ownership, the fingerprint of
//! [`super::uptodate::Fingerprint`], the echo's resourceVersion) and, of a Deployment, the
//! replicas, selector and status that make the AppService's status. The fingerprint is taken
//! when a child is parsed, and then its labels and annotations are dropped ([`slim`]). It never reads a pod
//! template or a Service's spec: whether a child holds what the guest renders is known from
//! this process's own applies ([`super::uptodate`]), and anything else is applied again. So
//! the caches hold these views, not the full objects: measured with heaptrack at 1000
//! AppServices (2026-12-05), a cached `Deployment` took 8.8 KiB of heap and a `Service` 4.1 KiB
//! (docs/development.md). Their metadata is parsed without managedFields
//! ([`metadata_without_managed_fields`]), and a Service's is all the API server sends
//! (`as=PartialObjectMetadata`). AppServices are parsed whole but for their managedFields
//! ([`ParsedAppService`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use serde::{Deserialize, Deserializer};

use super::child::ChildKind;
use super::uptodate::Fingerprint;
use crate::consts::ANNOTATION_ADOPT;
use crate::crd::{AppService, AppServiceSpec, AppServiceStatus};

/// A Deployment as the controller reads it: metadata, replicas, selector and status.
#[derive(Clone, Debug)]
pub struct DeploymentView {
    /// The Deployment's metadata, slimmed ([`slim`]).
    pub metadata: ObjectMeta,
    /// The fingerprint of its whole metadata, taken when parsed.
    pub fingerprint: Fingerprint,
    /// `spec.replicas` and `spec.selector`.
    pub spec: DeploymentSpecView,
    /// The status, with only the conditions that tell of trouble ([`trouble`]).
    pub status: Option<DeploymentStatus>,
}

/// The part of a Deployment's spec the controller reads.
#[derive(Clone, Debug, Default)]
pub struct DeploymentSpecView {
    /// Desired pods; 1 when unset.
    pub replicas: Option<i32>,
    /// The pods the Deployment selects: its `matchLabels` as a label selector, e.g. `app=nginx`.
    pub selector: Option<String>,
}

impl<'de> Deserialize<'de> for DeploymentView {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default, deserialize_with = "metadata_without_managed_fields")]
            metadata: ObjectMeta,
            #[serde(default)]
            spec: Spec,
            #[serde(default, deserialize_with = "status_with_trouble_only")]
            status: Option<DeploymentStatus>,
        }
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Spec {
            replicas: Option<i32>,
            selector: LabelSelector,
        }
        let wire = Wire::deserialize(deserializer)?;
        let selector = wire.spec.selector.match_labels.map(|labels| {
            let terms: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            terms.join(",")
        });
        let (fingerprint, metadata) = fingerprinted(ChildKind::Deployment, wire.metadata);
        Ok(Self {
            metadata,
            fingerprint,
            spec: DeploymentSpecView {
                replicas: wire.spec.replicas,
                selector,
            },
            status: wire.status,
        })
    }
}

/// A Service as the controller reads it: its metadata.
#[derive(Clone, Debug)]
pub struct ServiceView {
    /// The Service's metadata, slimmed ([`slim`]).
    pub metadata: ObjectMeta,
    /// The fingerprint of its whole metadata, taken when parsed.
    pub fingerprint: Fingerprint,
}

impl<'de> Deserialize<'de> for ServiceView {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default, deserialize_with = "metadata_without_managed_fields")]
            metadata: ObjectMeta,
        }
        let wire = Wire::deserialize(deserializer)?;
        let (fingerprint, metadata) = fingerprinted(ChildKind::Service, wire.metadata);
        Ok(Self {
            metadata,
            fingerprint,
        })
    }
}

/// A cached child's fingerprint ([`Fingerprint`]), taken from its whole metadata when parsed.
pub trait Fingerprinted {
    /// See [`Fingerprinted`].
    fn fingerprint(&self) -> Fingerprint;
}

impl Fingerprinted for DeploymentView {
    fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

impl Fingerprinted for ServiceView {
    fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

/// The [`Fingerprint`] of a child of kind `kind` with metadata `meta`, and `meta` as the views
/// keep it ([`slim`]): the fingerprint is taken first, from the whole metadata.
fn fingerprinted(kind: ChildKind, meta: ObjectMeta) -> (Fingerprint, ObjectMeta) {
    (Fingerprint::of(kind, &meta), slim(meta))
}

/// A child's metadata as the views keep it once its [`Fingerprint`] is taken: no labels, and of
/// the annotations only [`ANNOTATION_ADOPT`] (read when the child has no controller). The
/// controller reads the others only through the fingerprint, and each map costs a B-tree node
/// of eleven keys and values (544 bytes) however few it holds.
fn slim(mut meta: ObjectMeta) -> ObjectMeta {
    meta.labels = None;
    meta.annotations = meta
        .annotations
        .and_then(|mut all| all.remove_entry(ANNOTATION_ADOPT))
        .map(|adopt| BTreeMap::from([adopt]));
    meta
}

/// The reason the controller reports when Deployment condition `c` says the rollout is in
/// trouble (it cannot make progress, or cannot create pods); `None` for the routine ones
/// (`Available`, a progressing rollout), which the view does not keep.
pub fn trouble(c: &DeploymentCondition) -> Option<&'static str> {
    match (c.type_.as_deref()?, c.status.as_deref()?) {
        ("Progressing", "False") => Some("ProgressDeadlineExceeded"),
        ("ReplicaFailure", "True") => Some("ReplicaFailure"),
        _ => None,
    }
}

/// A Deployment's status without the routine conditions: every healthy Deployment has two,
/// each with four strings the controller never reads.
fn status_with_trouble_only<'de, D>(deserializer: D) -> Result<Option<DeploymentStatus>, D::Error>
where
    D: Deserializer<'de>,
{
    let mut status = Option::<DeploymentStatus>::deserialize(deserializer)?;
    if let Some(status) = &mut status {
        if let Some(conditions) = &mut status.conditions {
            conditions.retain(|c| trouble(c).is_some());
        }
        if status.conditions.as_ref().is_some_and(Vec::is_empty) {
            status.conditions = None;
        }
    }
    Ok(status)
}

/// Parses an object's `metadata` as [`ObjectMeta`] without its managedFields, which serde
/// skips instead of building: they are most of a child's metadata (each field set is a JSON
/// tree), and the controller never reads them.
pub fn metadata_without_managed_fields<'de, D>(deserializer: D) -> Result<ObjectMeta, D::Error>
where
    D: Deserializer<'de>,
{
    /// `ObjectMeta`'s fields but managedFields, by their JSON names.
    #[derive(Default, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct Wire {
        annotations: Option<BTreeMap<String, String>>,
        creation_timestamp: Option<Time>,
        deletion_grace_period_seconds: Option<i64>,
        deletion_timestamp: Option<Time>,
        finalizers: Option<Vec<String>>,
        generate_name: Option<String>,
        generation: Option<i64>,
        labels: Option<BTreeMap<String, String>>,
        name: Option<String>,
        namespace: Option<String>,
        owner_references: Option<Vec<OwnerReference>>,
        resource_version: Option<String>,
        self_link: Option<String>,
        uid: Option<String>,
    }
    let wire = Wire::deserialize(deserializer)?;
    Ok(ObjectMeta {
        annotations: wire.annotations,
        creation_timestamp: wire.creation_timestamp,
        deletion_grace_period_seconds: wire.deletion_grace_period_seconds,
        deletion_timestamp: wire.deletion_timestamp,
        finalizers: wire.finalizers,
        generate_name: wire.generate_name,
        generation: wire.generation,
        labels: wire.labels,
        managed_fields: None,
        name: wire.name,
        namespace: wire.namespace,
        owner_references: wire.owner_references,
        resource_version: wire.resource_version,
        self_link: wire.self_link,
        uid: wire.uid,
    })
}

/// An AppService as its watch parses it: the whole object but its managedFields, which serde
/// skips instead of building ([`metadata_without_managed_fields`]).
///
/// Why: every status the operator writes comes back through the AppService watch, and from then
/// on an AppService carries two field sets (the author's spec, the operator's status), each a
/// JSON tree the controller never reads; they were parsed and then cleared.
#[derive(Clone, Debug)]
pub struct ParsedAppService(pub AppService);

impl<'de> Deserialize<'de> for ParsedAppService {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// `AppService`'s fields, its metadata without managedFields.
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default, deserialize_with = "metadata_without_managed_fields")]
            metadata: ObjectMeta,
            spec: AppServiceSpec,
            #[serde(default)]
            status: Option<AppServiceStatus>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(Self(AppService {
            metadata: wire.metadata,
            spec: wire.spec,
            status: wire.status,
        }))
    }
}

/// Makes `$view`, whose metadata is `self.$meta`, address the API of `$full`: same group,
/// version, kind and URL; with `metadata_only`, every request for it asks for the object's
/// metadata alone (`as=PartialObjectMetadata`), so the API server sends nothing else.
macro_rules! view_of {
    ($view:ty, $full:ty, metadata_only: $metadata_only:expr, meta: $($meta:tt)+) => {
        impl kube::Resource for $view {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;

            fn kind(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::kind(dt)
            }

            fn group(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::group(dt)
            }

            fn version(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::version(dt)
            }

            fn api_version(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::api_version(dt)
            }

            fn plural(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::plural(dt)
            }

            fn metadata_api() -> bool {
                $metadata_only
            }

            fn meta(&self) -> &ObjectMeta {
                &self.$($meta)+
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.$($meta)+
            }
        }
    };
}

view_of!(DeploymentView, Deployment, metadata_only: false, meta: metadata);
// NB: the watch, the apply answers and the ownership reads of Services carry only metadata.
view_of!(ServiceView, Service, metadata_only: true, meta: metadata);
view_of!(ParsedAppService, AppService, metadata_only: false, meta: 0.metadata);

#[cfg(test)]
mod tests {
    use kube::Resource;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_deployment_view_keeps_what_the_controller_reads_and_skips_the_rest() {
        let full = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "generation": 3,
                         "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps.kudevops.io/v1alpha1",
                             "kind": "AppService", "name": "web", "uid": "a1",
                             "controller": true}],
                         "managedFields": [{"manager": "app-operator", "operation": "Apply",
                             "fieldsType": "FieldsV1",
                             "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"observedGeneration": 3, "readyReplicas": 2}
        });
        let view: DeploymentView = serde_json::from_value(full).expect("a Deployment parses");
        assert_eq!(view.metadata.generation, Some(3));
        assert_eq!(view.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(
            view.metadata.owner_references.as_ref().map(Vec::len),
            Some(1)
        );
        assert!(view.metadata.managed_fields.is_none());
        assert_eq!(view.spec.replicas, Some(2));
        assert_eq!(view.spec.selector.as_deref(), Some("app=web"));
        assert_eq!(view.status.and_then(|s| s.ready_replicas), Some(2));
        assert_eq!(DeploymentView::plural(&()), "deployments");
        assert_eq!(DeploymentView::api_version(&()), "apps/v1");
    }

    #[test]
    fn a_view_keeps_the_fingerprint_of_its_whole_metadata_and_of_it_only_the_adopt_annotation() {
        let meta = json!({"name": "web", "namespace": "ns", "uid": "u1", "generation": 3,
                          "resourceVersion": "7", "labels": {"app": "web", "team": "x"},
                          "annotations": {"note": "n", ANNOTATION_ADOPT: "web"}});
        let whole: ObjectMeta = serde_json::from_value(meta.clone()).expect("parses");
        let deployment: DeploymentView =
            serde_json::from_value(json!({"metadata": meta})).expect("parses");
        let service: ServiceView =
            serde_json::from_value(json!({"metadata": meta})).expect("parses");
        assert_eq!(
            deployment.fingerprint,
            Fingerprint::of(ChildKind::Deployment, &whole)
        );
        assert_eq!(
            service.fingerprint,
            Fingerprint::of(ChildKind::Service, &whole)
        );
        for slimmed in [&deployment.metadata, &service.metadata] {
            assert_eq!(slimmed.labels, None);
            assert_eq!(
                slimmed.annotations,
                Some(BTreeMap::from([(
                    ANNOTATION_ADOPT.to_owned(),
                    "web".to_owned()
                )]))
            );
            assert_eq!(slimmed.uid.as_deref(), Some("u1"));
        }

        // A label someone set changes the fingerprint; the view still holds no label.
        let mut relabelled = meta.clone();
        relabelled["labels"]["team"] = "y".into();
        let relabelled: DeploymentView =
            serde_json::from_value(json!({"metadata": relabelled})).expect("parses");
        assert_ne!(relabelled.fingerprint, deployment.fingerprint);
        let mut plain = meta;
        plain["annotations"] = json!({"note": "n"});
        let plain: ServiceView =
            serde_json::from_value(json!({"metadata": plain})).expect("parses");
        assert_eq!(plain.metadata.annotations, None);
    }

    #[test]
    fn a_deployment_view_keeps_only_the_conditions_that_tell_of_trouble() {
        let condition = |type_: &str, status: &str| {
            json!({"type": type_, "status": status, "reason": "R", "message": format!("{type_} {status}"),
                   "lastUpdateTime": "2026-12-06T00:00:00Z",
                   "lastTransitionTime": "2026-12-06T00:00:00Z"})
        };
        let with = |conditions: Vec<serde_json::Value>| {
            let view: DeploymentView = serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "ns"},
                "status": {"observedGeneration": 1, "readyReplicas": 1, "conditions": conditions}
            }))
            .expect("a Deployment parses");
            view.status.expect("has a status")
        };

        let healthy = with(vec![
            condition("Available", "True"),
            condition("Progressing", "True"),
        ]);
        assert_eq!(healthy.conditions, None);
        assert_eq!(healthy.ready_replicas, Some(1));

        let troubled = with(vec![
            condition("Available", "False"),
            condition("Progressing", "False"),
            condition("ReplicaFailure", "True"),
        ]);
        let kept: Vec<_> = troubled
            .conditions
            .iter()
            .flatten()
            .map(|c| (trouble(c), c.message.as_deref()))
            .collect();
        assert_eq!(
            kept,
            [
                (Some("ProgressDeadlineExceeded"), Some("Progressing False")),
                (Some("ReplicaFailure"), Some("ReplicaFailure True")),
            ]
        );
    }

    #[test]
    fn a_parsed_appservice_is_the_appservice_without_managed_fields() {
        let full = json!({
            "apiVersion": "apps.kudevops.io/v1alpha1", "kind": "AppService",
            "metadata": {"name": "web", "namespace": "ns", "uid": "a1", "generation": 2,
                         "labels": {"tier": "canary"},
                         "managedFields": [
                             {"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:spec": {"f:image": {}, "f:replicas": {}}}},
                             {"manager": "app-operator", "operation": "Apply",
                              "subresource": "status", "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:status": {"f:observedGeneration": {}}}}]},
            "spec": {"replicas": 2, "image": "nginx:1.27",
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
            "status": {"observedGeneration": 2}
        });
        let mut whole: AppService = serde_json::from_value(full.clone()).expect("parses");
        let ParsedAppService(parsed) = serde_json::from_value(full).expect("parses");
        assert_eq!(
            whole.metadata.managed_fields.as_ref().map(Vec::len),
            Some(2)
        );
        assert!(parsed.metadata.managed_fields.is_none());
        whole.metadata.managed_fields = None;
        let value = |app: &AppService| serde_json::to_value(app).expect("serializes");
        assert_eq!(value(&parsed), value(&whole));
        assert_eq!(parsed.spec.ports.len(), 1);
        assert_eq!(parsed.status.and_then(|s| s.observed_generation), Some(2));
        assert_eq!(ParsedAppService::plural(&()), "appservices");
        assert_eq!(
            ParsedAppService::api_version(&()),
            "apps.kudevops.io/v1alpha1"
        );
        assert_eq!(ParsedAppService::kind(&()), "AppService");
        assert!(!ParsedAppService::metadata_api());
    }

    #[test]
    fn a_service_view_is_its_metadata_and_addresses_services() {
        let full = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "resourceVersion": "7"},
            "spec": {"ports": [{"port": 80}], "clusterIP": "10.0.0.1"}
        });
        let view: ServiceView = serde_json::from_value(full).expect("a Service parses");
        assert_eq!(view.metadata.resource_version.as_deref(), Some("7"));
        // NB: what the API server sends for `as=PartialObjectMetadata`.
        let partial = json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": "web", "resourceVersion": "8",
                         "managedFields": [{"manager": "app-operator", "fieldsV1": {}}]}
        });
        let view: ServiceView = serde_json::from_value(partial).expect("metadata parses");
        assert_eq!(view.metadata.name.as_deref(), Some("web"));
        assert!(view.metadata.managed_fields.is_none());
        assert_eq!(ServiceView::plural(&()), "services");
        assert_eq!(ServiceView::api_version(&()), "v1");
        assert_eq!(ServiceView::kind(&()), "Service");
        assert!(ServiceView::metadata_api() && !DeploymentView::metadata_api());
    }
}
