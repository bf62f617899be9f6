//! The identities of the objects in a namespace, recorded before a fault and compared after it,
//! and a user's own objects beside the AppServices' children, to prove what a fault touched.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};

use crate::appservice::wait_rolled_out;

/// The identity of one object: uid and resourceVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `metadata.uid`: a new one means the object was deleted and created again.
    pub uid: String,
    /// `metadata.resourceVersion`: a new one means the object was written.
    pub resource_version: String,
}

/// The [`Identity`] of every Deployment and Service of a namespace, by `Kind/name`.
#[derive(Clone, Debug, Default)]
pub struct Snapshot(pub BTreeMap<String, Identity>);

impl Snapshot {
    /// Records the Deployments and Services of `namespace`.
    pub async fn take(client: &Client, namespace: &str) -> anyhow::Result<Self> {
        let lp = ListParams::default();
        let mut out = BTreeMap::new();
        let deployments = Api::<Deployment>::namespaced(client.clone(), namespace);
        for d in deployments.list_metadata(&lp).await? {
            out.insert(
                format!("Deployment/{}", d.name_any()),
                identity(&d.metadata),
            );
        }
        let services = Api::<Service>::namespaced(client.clone(), namespace);
        for s in services.list_metadata(&lp).await? {
            out.insert(format!("Service/{}", s.name_any()), identity(&s.metadata));
        }
        Ok(Self(out))
    }

    /// The objects of `self` that are gone from `later` or were created again (a new uid),
    /// other than `except` (`Kind/name`s, e.g. the children a test deleted).
    pub fn recreated(&self, later: &Snapshot, except: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for (key, before) in self.0.iter().filter(|(k, _)| !except.contains(k)) {
            match later.0.get(key) {
                None => out.push(format!("{key} is gone")),
                Some(after) if after.uid != before.uid => {
                    out.push(format!("{key} was deleted and created again"))
                }
                Some(_) => {}
            }
        }
        out
    }

    /// The objects `keys` (`Kind/name`s) of `self` that are gone from `later`, were created
    /// again, or written (a new resourceVersion).
    pub fn written(&self, later: &Snapshot, keys: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for key in keys {
            match (self.0.get(key), later.0.get(key)) {
                (Some(before), Some(after)) if before == after => {}
                (Some(_), Some(_)) => out.push(format!("{key} was written")),
                (Some(_), None) => out.push(format!("{key} is gone")),
                (None, _) => out.push(format!("{key} was not recorded")),
            }
        }
        out
    }
}

fn identity(meta: &ObjectMeta) -> Identity {
    Identity {
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
    }
}

/// Name of the user's own Deployment and Service that [`bystanders`] creates.
pub const BYSTANDER: &str = "user-web";

/// Creates a user's Deployment and Service named [`BYSTANDER`] in `namespace`, owned by no
/// AppService, and waits until the cluster is done writing the Deployment's status (its rollout
/// complete), so that any later write to either is someone else's. Returns their `Kind/name`s.
pub async fn bystanders(client: &Client, namespace: &str) -> anyhow::Result<Vec<String>> {
    let labels = serde_json::json!({"app": BYSTANDER, "owner": "a-user"});
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": BYSTANDER, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": BYSTANDER}},
            "template": {
                "metadata": {"labels": {"app": BYSTANDER}},
                "spec": {"containers": [{"name": "web", "image": "nginx:alpine"}]},
            },
        },
    }))?;
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": BYSTANDER, "labels": labels},
        "spec": {"selector": {"app": BYSTANDER}, "ports": [{"port": 80}]},
    }))?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .context("failed to create the user's Deployment")?;
    Api::<Service>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &service)
        .await
        .context("failed to create the user's Service")?;
    wait_rolled_out(&deployments, BYSTANDER, Duration::from_secs(60)).await?;
    Ok(vec![
        format!("Deployment/{BYSTANDER}"),
        format!("Service/{BYSTANDER}"),
    ])
}
