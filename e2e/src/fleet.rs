//! A fleet of AppServices in one namespace: created at once, and checked converged.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use app_operator::crd::AppService;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};

use crate::appservice::{condition, images, sample_named};
use crate::wait;

/// Creates `apps` in `namespace`, up to 16 at once.
pub async fn create_all(
    client: &Client,
    namespace: &str,
    apps: impl IntoIterator<Item = AppService>,
) -> anyhow::Result<()> {
    let api: Api<AppService> = Api::namespaced(client.clone(), namespace);
    futures::stream::iter(apps)
        .map(|app| {
            let api = api.clone();
            async move {
                let name = app.name_any();
                api.create(&PostParams::default(), &app)
                    .await
                    .with_context(|| format!("failed to create AppService {name}"))
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// The sample named `<prefix>-<i>` for each `i` in `range`, with one replica.
pub fn samples(prefix: &str, range: std::ops::Range<usize>) -> Vec<AppService> {
    range
        .map(|i| {
            let mut app = sample_named(&format!("{prefix}-{i}"));
            app.spec.replicas = Some(1);
            app
        })
        .collect()
}

/// What keeps the AppServices of a namespace from being converged, one line per problem.
#[derive(Clone, Debug, Default)]
pub struct Lag {
    /// AppServices found.
    pub apps: usize,
    /// Children missing, not controlled by their AppService, or not as its spec says.
    pub children: Vec<String>,
    /// Statuses not current, and Deployments whose replicas are not all ready yet.
    pub status: Vec<String>,
}

impl Lag {
    /// Whether every AppService is converged.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty() && self.status.is_empty()
    }

    /// Up to `n` problems, children first, on one line.
    pub fn first(&self, n: usize) -> String {
        let all = self.children.iter().chain(&self.status);
        let shown: Vec<_> = all.take(n).map(String::as_str).collect();
        shown.join("; ")
    }
}

/// What keeps the AppServices of `namespace` from being converged ([`Lag::is_empty`] when
/// nothing does). Converged: its Deployment and (when it has ports) its Service exist and are
/// controlled by it, the Deployment has its replicas (all ready) and image, and its status is
/// current (observed generation, `Ready=True`, every replica ready, a guest digest).
pub async fn converged(client: &Client, namespace: &str) -> anyhow::Result<Lag> {
    let lp = ListParams::default();
    let apps = Api::<AppService>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?;
    let deployments: BTreeMap<_, _> = Api::<Deployment>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
        .into_iter()
        .map(|d| (d.name_any(), d))
        .collect();
    let services: BTreeMap<_, _> = Api::<Service>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
        .into_iter()
        .map(|s| (s.name_any(), s))
        .collect();
    let mut lag = Lag {
        apps: apps.items.len(),
        ..Lag::default()
    };
    for app in &apps {
        let name = app.name_any();
        let uid = app.uid().unwrap_or_default();
        let replicas = app.spec.replicas.unwrap_or(1);
        let mut child = |what: String| lag.children.push(format!("{name}: {what}"));
        let mut ready_replicas = None;
        match deployments.get(&name) {
            None => child("no Deployment".into()),
            Some(d) if !controlled_by(&d.metadata, &uid) => {
                child("its Deployment is not controlled by it".into())
            }
            Some(d) => {
                if d.spec.replicas != Some(replicas) {
                    child(format!(
                        "Deployment replicas {:?}, want {replicas}",
                        d.spec.replicas
                    ));
                }
                if images(d) != [app.spec.image.as_str()] {
                    child(format!("Deployment images {:?}", images(d)));
                }
                ready_replicas = d.status.as_ref().and_then(|s| s.ready_replicas);
            }
        }
        if !app.spec.ports.is_empty() {
            match services.get(&name) {
                None => child("no Service".into()),
                Some(s) if !controlled_by(&s.metadata, &uid) => {
                    child("its Service is not controlled by it".into())
                }
                Some(_) => {}
            }
        }
        let status = app.status.clone().unwrap_or_default();
        let want = format!("{replicas}/{replicas}");
        if status.observed_generation != app.metadata.generation {
            lag.status.push(format!(
                "{name}: status observed generation {:?} of {:?}",
                status.observed_generation, app.metadata.generation
            ));
        } else if ready_replicas.unwrap_or(0) != replicas
            || status.ready.as_deref() != Some(want.as_str())
            || status.ready_replicas != Some(replicas)
            || condition(app, "Ready").is_none_or(|c| c.status != "True")
            || status.guest_digest.is_none()
        {
            lag.status.push(format!(
                "{name}: status ready {:?} (Deployment {ready_replicas:?}), want {want}",
                status.ready
            ));
        }
    }
    Ok(lag)
}

/// Whether `meta` has a controller ownerReference to the object `uid`.
fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// When a fleet converged, measured from a given instant.
#[derive(Clone, Copy, Debug)]
pub struct Converged {
    /// Every child applied as the spec says (first seen).
    pub children: Duration,
    /// Everything [`converged`], statuses and readiness too.
    pub all: Duration,
}

/// Waits up to `timeout` until `namespace` holds `count` AppServices, all [`converged`]; returns
/// the times from `since`. A timeout names what still lags.
pub async fn wait_converged(
    client: &Client,
    namespace: &str,
    count: usize,
    since: Instant,
    timeout: Duration,
) -> anyhow::Result<Converged> {
    let what = format!("{count} AppServices in {namespace} to converge");
    let children = Cell::new(None);
    let waited = wait::until(&what, timeout, || {
        let children = &children;
        async move {
            let lag = converged(client, namespace).await?;
            if lag.apps == count && lag.children.is_empty() && children.get().is_none() {
                children.set(Some(since.elapsed()));
            }
            Ok((lag.apps == count && lag.is_empty()).then(|| since.elapsed()))
        }
    })
    .await;
    match waited {
        Ok(all) => Ok(Converged {
            children: children.get().unwrap_or(all),
            all,
        }),
        Err(err) => {
            let lag = converged(client, namespace).await?;
            Err(err.context(format!(
                "{} of {count} AppServices found; {} child and {} status problems, first: {}",
                lag.apps,
                lag.children.len(),
                lag.status.len(),
                lag.first(10)
            )))
        }
    }
}
