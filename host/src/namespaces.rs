//! The Pod Security level each namespace enforces (its `pod-security.kubernetes.io/enforce`
//! label), for the output policy: watched by the controller, looked up once by the swap dry run
//! and `plan`.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use crate::guest::admission::{self, Level};

/// The levels namespaces enforce, and which namespaces are being deleted, kept by a metadata
/// watch of Namespaces. Cheap to clone.
#[derive(Clone)]
pub struct Levels {
    store: Store<PartialObjectMeta<Namespace>>,
}

impl Levels {
    /// The levels of the namespaces in `store`, a cache of namespace metadata.
    pub fn new(store: Store<PartialObjectMeta<Namespace>>) -> Self {
        Self { store }
    }

    /// The level `namespace` enforces, if it carries the label. `None` also for a namespace
    /// not (yet) in the cache: the configured level then applies alone.
    pub fn get(&self, namespace: &str) -> Option<Level> {
        let ns = self.store.get(&ObjectRef::new(namespace))?;
        admission::namespace_level(ns.metadata.labels.as_ref())
    }

    /// Whether `namespace` is being deleted: the API server then refuses to create anything in
    /// it. False for a namespace not (yet) in the cache.
    pub fn terminating(&self, namespace: &str) -> bool {
        self.store
            .get(&ObjectRef::new(namespace))
            .is_some_and(|ns| ns.metadata.deletion_timestamp.is_some())
    }
}

/// The level each of `namespaces` enforces, read once (one GET per namespace).
pub async fn lookup<'a>(
    client: &Client,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> Result<HashMap<String, Option<Level>>, kube::Error> {
    let api = Api::<Namespace>::all(client.clone());
    let mut levels = HashMap::new();
    for name in namespaces.into_iter().collect::<BTreeSet<_>>() {
        let meta = api.get_metadata_opt(name).await?;
        let level = meta.and_then(|m| admission::namespace_level(m.metadata.labels.as_ref()));
        levels.insert(name.to_owned(), level);
    }
    Ok(levels)
}
