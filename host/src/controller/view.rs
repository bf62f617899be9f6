//! The controller's view of its children: the parts of a live Deployment or Service it reads,
//! parsed from the full object (watch events, apply answers) with everything else skipped.
//!
//! The controller reads a child's metadata (ownership, the fingerprint of
//! [`super::uptodate::Fingerprint`], the echo's resourceVersion) and, of a Deployment, the
//! replicas, selector and status that make the AppService's status. It never reads a pod
//! template or a Service's spec: whether a child holds what the guest renders is known from
//! this process's own applies ([`super::uptodate`]), and anything else is applied again. So
//! the caches hold these views, not the full objects: measured with heaptrack at 1000
//! AppServices (2026-12-05), a cached `Deployment` took 8.8 KiB of heap and a `Service` 4.1 KiB
//! (docs/development.md).

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Deserialize;

/// A Deployment as the controller reads it: metadata, replicas, selector and status.
#[derive(Clone, Debug, Deserialize)]
pub struct DeploymentView {
    /// The Deployment's metadata (managedFields dropped by the watch).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec.replicas` and `spec.selector`.
    #[serde(default)]
    pub spec: DeploymentSpecView,
    /// The Deployment controller's report.
    #[serde(default)]
    pub status: Option<DeploymentStatus>,
}

/// The part of a Deployment's spec the controller reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct DeploymentSpecView {
    /// Desired pods; 1 when unset.
    #[serde(default)]
    pub replicas: Option<i32>,
    /// The pods the Deployment selects.
    #[serde(default)]
    pub selector: LabelSelector,
}

/// A Service as the controller reads it: its metadata.
#[derive(Clone, Debug, Deserialize)]
pub struct ServiceView {
    /// The Service's metadata (managedFields dropped by the watch).
    #[serde(default)]
    pub metadata: ObjectMeta,
}

/// Makes `$view` address the API of `$full`: same group, version, kind and URL.
macro_rules! view_of {
    ($view:ty, $full:ty) => {
        impl k8s_openapi::Resource for $view {
            const API_VERSION: &'static str = <$full as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$full as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$full as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$full as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str =
                <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = NamespaceResourceScope;
        }

        impl k8s_openapi::Metadata for $view {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

view_of!(DeploymentView, Deployment);
view_of!(ServiceView, Service);

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
                         "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"observedGeneration": 3, "readyReplicas": 2}
        });
        let view: DeploymentView = serde_json::from_value(full).expect("a Deployment parses");
        assert_eq!(view.metadata.generation, Some(3));
        assert_eq!(view.spec.replicas, Some(2));
        let labels = view.spec.selector.match_labels.as_ref().expect("selector");
        assert_eq!(labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(view.status.and_then(|s| s.ready_replicas), Some(2));
        assert_eq!(DeploymentView::plural(&()), "deployments");
        assert_eq!(DeploymentView::api_version(&()), "apps/v1");
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
        assert_eq!(ServiceView::plural(&()), "services");
        assert_eq!(ServiceView::api_version(&()), "v1");
        assert_eq!(ServiceView::kind(&()), "Service");
    }
}
