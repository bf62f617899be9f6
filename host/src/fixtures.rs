//! Test fixtures: AppServices as the API server would return them.

use kube::api::ObjectMeta;
use serde_json::json;

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
