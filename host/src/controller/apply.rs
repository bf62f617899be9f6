//! Guest output to the cluster: owner-stamped server-side apply of each child, and pruning of
//! owned children the guest no longer emits.
//!
//! No adoption: a child the guest names is written only when it is absent or controlled by the
//! AppService; one that exists under another controller, or none, is left untouched and the
//! apply fails with [`Error::ChildConflict`], unless its owner opted in with the
//! [`ANNOTATION_ADOPT`] annotation. Every write carries a precondition, so the guard holds even
//! when the cache lags ([`Precondition`]): a child the cache does not know is created by a
//! create-only apply, one the cache shows as the AppService's own is applied on its uid.
//!
//! **Warning**: [`prune`] deletes objects. Call it only after a successful guest call and a
//! successful apply of everything the guest emitted.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::ser::{Serialize, SerializeMap, Serializer};
use tracing::{debug, info};

pub use super::child::ChildKind;

use super::cache::Cache;
use super::child::ChildKey;
use super::echo::{OwnWrites, Written};
use super::error::{Error, Result};
use super::uptodate::{BodyHash, Last, LastApplied};
use super::view::{DeploymentView, Fingerprinted, ServiceView};
use crate::consts::{ANNOTATION_ADOPT, FIELD_MANAGER};
use crate::crd::AppService;
use crate::guest::DesiredObject;

/// Caches of the children the operator manages, kept by the controller's watches, and what
/// this process wrote to them.
#[derive(Clone)]
pub struct Children {
    /// Deployments labelled as managed by the operator.
    pub deployments: Cache<DeploymentView>,
    /// Services labelled as managed by the operator.
    pub services: Cache<ServiceView>,
    /// What this process last applied, to skip applies that would change nothing.
    pub last_applied: Arc<LastApplied>,
    /// The versions this process's applies left, to drop their echoes from the child watches.
    pub own_writes: Arc<OwnWrites>,
}

/// What applying one child did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing: the child was up to date, or the apply changed nothing.
    None,
    /// The child did not exist (as far as the cache knew) and was created.
    Created,
    /// The child changed because the guest renders something new for it (a new spec or guest,
    /// or the first apply of this process).
    Updated,
    /// The guest renders what this process last applied, but someone had changed the child:
    /// the apply set it back.
    Corrected,
}

/// What [`apply_all`] did.
#[derive(Debug, Default)]
pub struct Applied {
    /// The Deployment the guest emitted, as the API server returned it after the apply (or as
    /// cached, when it was up to date), shared with the cache or the record of the write.
    pub deployment: Option<Arc<DeploymentView>>,
    /// `(Kind/name, change)` of every child that the apply created or changed.
    pub changes: Vec<(String, Change)>,
    /// `Kind/name` of the children [`prune`] deleted after the apply (filled by the caller).
    pub pruned: Vec<String>,
}

impl Applied {
    /// `Kind/name` of the children with change `change`.
    pub fn with(&self, change: Change) -> Vec<String> {
        self.changes
            .iter()
            .filter(|(_, c)| *c == change)
            .map(|(child, _)| child.clone())
            .collect()
    }
}

/// Server-side applies every object of `stamped` (the guest's output stamped for `app`,
/// [`crate::stamp::children`]) with the operator's field manager, forcing conflicts (the
/// operator owns the fields of the children it controls). Applies nothing when a cached child
/// is not `app`'s ([`check_cached_ownership`]); a child the cache does not know is created only
/// if it does not exist, and checked when it does ([`apply_one`]).
pub async fn apply_all(
    client: &Client,
    children: &Children,
    app: &AppService,
    stamped: &[DesiredObject],
) -> Result<Applied> {
    let ns = app.namespace().unwrap_or_default();
    check_cached_ownership(children, app, &ns, stamped)?;
    // NB: the children are independent objects: apply them at once, not one after another.
    let results = future::try_join_all(stamped.iter().map(|object| async {
        let kind = ChildKind::of(&object.api_version, &object.kind).ok_or_else(|| {
            Error::UnsupportedKind {
                api_version: object.api_version.clone(),
                kind: object.kind.clone(),
            }
        })?;
        let key = (kind, ns.clone(), object.name.clone());
        let (deployment, change) = match kind {
            ChildKind::Deployment => {
                let store = &children.deployments.store;
                let (deployment, change) =
                    apply_one(client, store, children, app, key, &object.body).await?;
                (Some(deployment), change)
            }
            ChildKind::Service => {
                let store = &children.services.store;
                let change = apply_one(client, store, children, app, key, &object.body)
                    .await?
                    .1;
                (None, change)
            }
        };
        Ok::<_, Error>((kind, &object.name, deployment, change))
    }))
    .await?;
    let mut applied = Applied::default();
    for (kind, name, deployment, change) in results {
        if applied.deployment.is_none() {
            applied.deployment = deployment;
        }
        if change != Change::None {
            applied
                .changes
                .push((format!("{}/{name}", kind.as_str()), change));
        }
    }
    Ok(applied)
}

/// What must hold for an apply to be written, sent in the applied object's metadata: the API
/// server checks it atomically with the write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// The object must not exist: `metadata.resourceVersion` [`CREATE_ONLY_VERSION`]. The API
    /// server creates an absent object whatever version the apply names, and refuses (409
    /// Conflict) any existing object whose version differs, which every object's does.
    Absent,
    /// The object must exist with this uid (`metadata.uid`): a child deleted, or deleted and
    /// re-created by someone else, since the cache saw it is not written (409 or 422).
    Uid(String),
}

/// The `metadata.resourceVersion` of a create-only apply ([`Precondition::Absent`]). etcd's
/// revisions start at 1 and its first write gets revision 2, so no stored object has version 1.
pub const CREATE_ONLY_VERSION: &str = "1";

impl Precondition {
    /// `body` with the precondition in its metadata, as it is sent: serialized from `body`
    /// without copying it.
    pub fn on<'a>(&'a self, body: &'a serde_json::Value) -> Conditioned<'a> {
        Conditioned {
            body,
            precondition: self,
        }
    }

    /// The metadata field that carries the precondition, and its value.
    fn field(&self) -> (&'static str, &str) {
        match self {
            Precondition::Absent => ("resourceVersion", CREATE_ONLY_VERSION),
            Precondition::Uid(uid) => ("uid", uid),
        }
    }
}

/// An object body with a [`Precondition`] in its metadata ([`Precondition::on`]). A body that
/// is not a JSON object is sent as it is; one without metadata gets metadata holding only the
/// precondition.
#[derive(Debug)]
pub struct Conditioned<'a> {
    body: &'a serde_json::Value,
    precondition: &'a Precondition,
}

impl Serialize for Conditioned<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let Some(object) = self.body.as_object() else {
            return self.body.serialize(serializer);
        };
        let absent = !object.contains_key("metadata");
        let mut map = serializer.serialize_map(Some(object.len() + usize::from(absent)))?;
        for (key, value) in object {
            match value {
                serde_json::Value::Object(meta) if key == "metadata" => {
                    map.serialize_entry(key, &self.with(meta))?
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        if absent {
            map.serialize_entry("metadata", &self.with(&serde_json::Map::new()))?;
        }
        map.end()
    }
}

impl<'a> Conditioned<'a> {
    fn with(&self, meta: &'a serde_json::Map<String, serde_json::Value>) -> ConditionedMeta<'a> {
        let (field, value) = self.precondition.field();
        ConditionedMeta { meta, field, value }
    }
}

/// Metadata with one field set over whatever it held.
struct ConditionedMeta<'a> {
    meta: &'a serde_json::Map<String, serde_json::Value>,
    field: &'static str,
    value: &'a str,
}

impl Serialize for ConditionedMeta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let kept = self.meta.iter().filter(|(key, _)| *key != self.field);
        let mut map = serializer.serialize_map(Some(kept.clone().count() + 1))?;
        for (key, value) in kept {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry(self.field, self.value)?;
        map.end()
    }
}

async fn patch<K>(
    client: &Client,
    ns: &str,
    kind: ChildKind,
    name: &str,
    body: &serde_json::Value,
    precondition: &Precondition,
) -> Result<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(precondition.on(body)))
        .await
        .map_err(|source| Error::Apply {
            kind: kind.as_str(),
            name: name.to_owned(),
            source,
        })
}

/// Fails with [`Error::ChildConflict`] for the first child in `objects` that the cache of
/// managed children holds and that `app` may not write ([`ownership`]), before anything is
/// written. A child the cache does not hold (an object someone else created carries no
/// managed-by label) is checked by [`apply_one`]'s create-only apply instead.
fn check_cached_ownership(
    children: &Children,
    app: &AppService,
    ns: &str,
    objects: &[DesiredObject],
) -> Result<()> {
    for object in objects {
        let Some(kind) = ChildKind::of(&object.api_version, &object.kind) else {
            continue;
        };
        let name = object.name.as_str();
        let meta = match kind {
            ChildKind::Deployment => cached_meta(&children.deployments.store, ns, name),
            ChildKind::Service => cached_meta(&children.services.store, ns, name),
        };
        if let Some(meta) = meta {
            conflict(kind, name, &meta, app)?;
        }
    }
    Ok(())
}

/// The metadata of the cached child `name` in `ns`.
fn cached_meta<K>(store: &Store<K>, ns: &str, name: &str) -> Option<ObjectMeta>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .get(&ObjectRef::new(name).within(ns))
        .map(|child| child.meta().clone())
}

/// [`Error::ChildConflict`] unless `app` may write the existing child `name` ([`ownership`]).
fn conflict(kind: ChildKind, name: &str, meta: &ObjectMeta, app: &AppService) -> Result<()> {
    ownership(meta, app).map_err(|owner| Error::ChildConflict {
        kind: kind.as_str(),
        name: name.to_owned(),
        owner,
        app: app.name_any(),
        annotation: ANNOTATION_ADOPT,
    })
}

/// The metadata of child `name` of kind `K`, read from the API server.
async fn read_meta<K>(
    client: &Client,
    ns: &str,
    kind: ChildKind,
    name: &str,
) -> Result<Option<ObjectMeta>>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    K: Clone + DeserializeOwned + std::fmt::Debug + 'static,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let found = api
        .get_metadata_opt(name)
        .await
        .map_err(|source| Error::Get {
            kind: kind.as_str(),
            name: name.to_owned(),
            source,
        })?;
    Ok(found.map(|m| m.metadata))
}

/// Whether `app` may write an existing child with metadata `meta`: it is its controller, or the
/// child has no controller and its [`ANNOTATION_ADOPT`] annotation names `app`. Otherwise, who
/// controls the child, for the conflict message.
pub fn ownership(meta: &ObjectMeta, app: &AppService) -> Result<(), String> {
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match controller {
        Some(c) if app.uid().is_some_and(|uid| uid == c.uid) => Ok(()),
        Some(c) => Err(format!(
            "controlled by {} {} (uid {})",
            c.kind, c.name, c.uid
        )),
        None => {
            let adopt = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_ADOPT));
            if adopt.is_some_and(|name| *name == app.name_any()) {
                Ok(())
            } else {
                Err("it has no controller".to_owned())
            }
        }
    }
}

/// Applies one child unless the cache shows it up to date. Returns the child as the API server
/// (or the cache) has it, shared, and what the apply did.
///
/// A cached child (checked by [`check_cached_ownership`]), or one this process wrote and the
/// cache does not show yet ([`OwnWrites::unseen`]), is applied on its uid. Any other child is
/// created by a create-only apply; when that finds an object (409: the
/// cache lags, or the object is someone else's), its metadata is read, and it is applied on its
/// uid if `app` may write it, else left alone with [`Error::ChildConflict`].
async fn apply_one<K>(
    client: &Client,
    store: &Store<K>,
    children: &Children,
    app: &AppService,
    key: ChildKey,
    body: &serde_json::Value,
) -> Result<(Arc<K>, Change)>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    K: Fingerprinted + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (kind, ns, name) = &key;
    let cached = store.get(&ObjectRef::new(name).within(ns));
    let last = children.last_applied.last(&key, body);
    let is_last = last != Last::Other;
    if is_last && let Some(live) = live(children, &key, cached.as_ref()) {
        // NB: a child changed since the apply of that body is applied again: the cache holds
        // no spec to compare ([`super::view`]), and an apply that changes nothing is a write,
        // not a change.
        if last.verified(live.fingerprint()) {
            return Ok((live, Change::None));
        }
    }
    let _flight = children.own_writes.begin(&key);
    // NB: a child this process wrote whose echo has not arrived is its own, even when the
    // cache does not show it yet (its other watch event came first).
    let known = match &cached {
        Some(cached) => cached.uid().map(|uid| (cached.resource_version(), uid)),
        None => children
            .own_writes
            .unseen(&key)
            .map(|w| (Some(w.version), w.uid)),
    };
    let (before, after): (Option<String>, K) = match known {
        Some((before, uid)) => {
            let applied = patch(client, ns, *kind, name, body, &Precondition::Uid(uid)).await;
            if applied.is_err() {
                // NB: a recorded write may be stale (its echo lost to a re-list): the next
                // reconcile goes by the cache alone.
                children.own_writes.forget(&key);
            }
            (before, applied?)
        }
        None => match patch(client, ns, *kind, name, body, &Precondition::Absent).await {
            Err(Error::Apply {
                source: kube::Error::Api(status),
                ..
            }) if status.code == 409 => {
                let Some(meta) = read_meta::<K>(client, ns, *kind, name).await? else {
                    // NB: gone again since the create-only apply: the next reconcile creates it.
                    return Err(Error::Vanished {
                        kind: kind.as_str(),
                        name: name.clone(),
                    });
                };
                conflict(*kind, name, &meta, app)?;
                let precondition = Precondition::Uid(meta.uid.clone().unwrap_or_default());
                let after = patch(client, ns, *kind, name, body, &precondition).await?;
                (meta.resource_version, after)
            }
            created => (None, created?),
        },
    };
    // NB: kept with the write until its echo comes; the views parse no managedFields.
    let after = Arc::new(after);
    let answer = after.fingerprint();
    children.last_applied.applied(key.clone(), body, answer);
    let change = match (&before, after.resource_version()) {
        (_, None) => Change::None,
        (before, after) if *before == after => Change::None,
        (None, _) => Change::Created,
        (Some(_), _) if is_last => Change::Corrected,
        (Some(_), _) => Change::Updated,
    };
    if change != Change::None
        && let Some(version) = after.resource_version()
    {
        let written = Written {
            version,
            uid: after.uid().unwrap_or_default(),
            before,
            object: after.clone(),
        };
        children.own_writes.wrote(key, written);
    }
    Ok((after, change))
}

/// The children `rendered` (each with the hash of its body) as [`apply_all`] and [`prune`] would
/// leave them, when that is as they are: every one is still what this process last applied to
/// it, unchanged since that apply ([`LastApplied::holds`]), and `app`
/// controls no other cached child. Then there is nothing to apply or prune, and this returns
/// what [`apply_all`] would (the Deployment as cached, no change); otherwise `None`.
pub fn as_last_applied(
    children: &Children,
    app: &AppService,
    rendered: &[(ChildKey, BodyHash)],
) -> Option<Applied> {
    let mut deployment = None;
    for (key, body) in rendered {
        match key.0 {
            ChildKind::Deployment => {
                deployment = Some(holding(&children.deployments.store, children, key, *body)?);
            }
            ChildKind::Service => {
                holding(&children.services.store, children, key, *body)?;
            }
        }
    }
    let keep = rendered
        .iter()
        .map(|((kind, _, name), _)| (*kind, name.as_str()))
        .collect();
    orphans(children, app, &keep).is_empty().then(|| Applied {
        deployment,
        ..Applied::default()
    })
}

/// The child `key` as it is now ([`live`], from `store`), when it still holds `body`
/// ([`LastApplied::holds`]).
fn holding<K>(
    store: &Store<K>,
    children: &Children,
    key: &ChildKey,
    body: BodyHash,
) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Fingerprinted + Clone + Send + Sync + 'static,
{
    let (_, ns, name) = key;
    let cached = store.get(&ObjectRef::new(name).within(ns));
    let live = live(children, key, cached.as_ref())?;
    let fingerprint = live.fingerprint();
    children
        .last_applied
        .holds(key, body, fingerprint)
        .then_some(live)
}

/// The child `key` as it is now: as this process's last write returned it while the cache still
/// shows what was there before that write (a reconcile for another child's event came before
/// this child's watch event, [`OwnWrites::pending`]), else as cached.
fn live<K>(children: &Children, key: &ChildKey, cached: Option<&Arc<K>>) -> Option<Arc<K>>
where
    K: Resource + Send + Sync + 'static,
{
    let cached_version = cached.map(|c| c.resource_version().unwrap_or_default());
    children
        .own_writes
        .pending::<K>(key, cached_version.as_deref())
        .or_else(|| cached.cloned())
}

/// Deletes the children controlled by `app` that are not among `objects`. Returns `Kind/name`
/// of each deleted child.
pub async fn prune(
    client: &Client,
    children: &Children,
    app: &AppService,
    objects: &[DesiredObject],
) -> Result<Vec<String>> {
    let keep = keep(objects);
    let mut pruned = Vec::new();
    for (kind, name, uid) in orphans(children, app, &keep) {
        let ns = app.namespace().unwrap_or_default();
        match kind {
            ChildKind::Deployment => {
                delete::<DeploymentView>(client, &ns, kind, &name, uid).await?
            }
            ChildKind::Service => delete::<ServiceView>(client, &ns, kind, &name, uid).await?,
        }
        let key = (kind, ns.clone(), name.clone());
        children.last_applied.forget(&key);
        children.own_writes.forget(&key);
        info!(kind = kind.as_str(), child = %name, "pruned a child the guest no longer emits");
        pruned.push(format!("{}/{name}", kind.as_str()));
    }
    Ok(pruned)
}

/// `(kind, name, uid)` of the cached children controlled by `app` and not in `keep`. Looks only
/// at `app`'s own children (the caches are indexed by controller).
fn orphans(
    children: &Children,
    app: &AppService,
    keep: &BTreeSet<(ChildKind, &str)>,
) -> Vec<(ChildKind, String, Option<String>)> {
    let Some(uid) = app.uid() else {
        return Vec::new();
    };
    let deployments = children.deployments.controlled_by(&uid);
    let services = children.services.controlled_by(&uid);
    let cached = deployments
        .iter()
        .map(|d| (ChildKind::Deployment, d.meta()))
        .chain(services.iter().map(|s| (ChildKind::Service, s.meta())));
    orphans_among(cached, app, keep)
}

/// The keys of `objects` (the guest's output) as [`orphans_among`] takes them: the children to
/// keep.
pub fn keep(objects: &[DesiredObject]) -> BTreeSet<(ChildKind, &str)> {
    objects
        .iter()
        .filter_map(|o| Some((ChildKind::of(&o.api_version, &o.kind)?, o.name.as_str())))
        .collect()
}

/// `(kind, name, uid)` of the children among `found` that `app` controls (same namespace, `app`
/// as controlling owner) and that are not in `keep`: what [`prune`] deletes. `plan` calls it
/// with the children it lists, the controller with its caches.
pub fn orphans_among<'a>(
    found: impl IntoIterator<Item = (ChildKind, &'a ObjectMeta)>,
    app: &AppService,
    keep: &BTreeSet<(ChildKind, &str)>,
) -> Vec<(ChildKind, String, Option<String>)> {
    let Some(owner_uid) = app.uid() else {
        return Vec::new();
    };
    let ns = app.namespace();
    let controlled = |meta: &ObjectMeta| {
        meta.namespace == ns
            && meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == owner_uid)
    };
    found
        .into_iter()
        .filter(|(_, meta)| controlled(meta))
        .map(|(kind, meta)| {
            (
                kind,
                meta.name.clone().unwrap_or_default(),
                meta.uid.clone(),
            )
        })
        .filter(|(kind, name, _)| !keep.contains(&(*kind, name.as_str())))
        .collect()
}

async fn delete<K>(
    client: &Client,
    ns: &str,
    kind: ChildKind,
    name: &str,
    uid: Option<String>,
) -> Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    // NB: the uid precondition makes sure a child re-created in the meantime is not deleted.
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
            debug!(kind = kind.as_str(), child = %name, "already gone or replaced");
            Ok(())
        }
        Err(source) => Err(Error::Prune {
            kind: kind.as_str(),
            name: name.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests;
