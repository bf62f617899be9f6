//! Test fixtures: AppServices and Deployments as the API server would return them.

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use kube::api::ObjectMeta;
use serde_json::json;

use crate::controller::view::DeploymentView;
use crate::crd::{AppService, AppServiceSpec};

impl AppService {
    /// The sample AppService `nginx` in namespace `ns`, generation 1, as stored.
    pub fn test() -> Self {
        let mut app = AppService::new(
            "nginx",
            serde_json::from_value::<AppServiceSpec>(json!({
                "replicas": 3,
                "image": "nginx:1.27",
                "ports": [{"port": 80, "targetPort": 80, "nodePort": 30080}],
            }))
            .expect("valid spec"),
        );
        app.metadata = ObjectMeta {
            name: Some("nginx".into()),
            namespace: Some("ns".into()),
            uid: Some("uid-1".into()),
            generation: Some(1),
            ..ObjectMeta::default()
        };
        app
    }

    /// The same AppService at another generation.
    pub fn at_generation(mut self, generation: i64) -> Self {
        self.metadata.generation = Some(generation);
        self
    }
}

/// A Deployment of `desired` replicas of which `ready` are ready (and available, updated), as
/// the controller's cache holds it.
pub(crate) fn deployment(desired: i32, ready: i32) -> DeploymentView {
    serde_json::from_value(json!({
        "metadata": {"name": "nginx", "namespace": "ns", "generation": 2},
        "spec": {
            "replicas": desired,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}}},
        },
        "status": {
            "observedGeneration": 2,
            "replicas": desired,
            "updatedReplicas": desired,
            "readyReplicas": ready,
            "availableReplicas": ready,
        },
    }))
    .expect("valid Deployment")
}

/// A Deployment whose rollout exceeded its progress deadline.
pub(crate) fn stuck_deployment() -> DeploymentView {
    let mut d = deployment(3, 1);
    let status: &mut DeploymentStatus = d.status.as_mut().expect("has status");
    status.conditions = Some(vec![DeploymentCondition {
        type_: Some("Progressing".into()),
        status: Some("False".into()),
        reason: Some("ProgressDeadlineExceeded".into()),
        message: Some("ReplicaSet \"nginx-1\" has timed out progressing.".into()),
        ..DeploymentCondition::default()
    }]);
    d
}
