//! A watched cache of one kind of child, indexed by controlling owner, so that pruning one
//! AppService looks at its own children instead of every cached one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

/// The cached children of one kind and the index of them by the uid of their controller.
#[derive(Clone)]
pub struct Cache<K>
where
    K: Resource<DynamicType = ()> + 'static,
{
    /// Every cached child, as the watch last saw it.
    pub store: Store<K>,
    owners: OwnerIndex<K>,
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// The cache of `store`, indexed by `owners`, which must see the same watch events.
    pub fn new(store: Store<K>, owners: OwnerIndex<K>) -> Self {
        Self { store, owners }
    }

    /// The cached children whose controlling owner has uid `owner`.
    pub fn controlled_by(&self, owner: &str) -> Vec<Arc<K>> {
        let refs: Vec<ObjectRef<K>> = self
            .owners
            .lock()
            .live
            .owned
            .get(owner)
            .cloned()
            .unwrap_or_default();
        refs.iter().filter_map(|r| self.store.get(r)).collect()
    }
}

/// Which cached child each owner controls, kept from the watch's events the same way the
/// reflector keeps its store: a re-list builds a new index, swapped in when the list is done.
pub struct OwnerIndex<K: Resource<DynamicType = ()>>(Arc<Mutex<Index<K>>>);

impl<K: Resource<DynamicType = ()>> Clone for OwnerIndex<K> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K: Resource<DynamicType = ()>> Default for OwnerIndex<K> {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Index {
            live: Owners::default(),
            relisting: None,
        })))
    }
}

impl<K: Resource<DynamicType = ()>> OwnerIndex<K> {
    /// Updates the index for one watch event. Returns the controller uids of the children a
    /// re-list no longer shows: deleted while the watch was away, with no deletion event.
    pub fn apply_watcher_event(&self, event: &watcher::Event<K>) -> Vec<String> {
        let mut index = self.lock();
        match event {
            watcher::Event::Apply(obj) => index.live.insert(obj),
            watcher::Event::Delete(obj) => index.live.remove(&key_of(obj)),
            watcher::Event::Init => index.relisting = Some(Owners::default()),
            watcher::Event::InitApply(obj) => {
                if let Some(relisting) = &mut index.relisting {
                    relisting.insert(obj);
                }
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = index.relisting.take() {
                    let old = std::mem::replace(&mut index.live, relisted);
                    let mut gone: Vec<String> = old
                        .owner_of
                        .into_iter()
                        .filter(|(child, _)| !index.live.owner_of.contains_key(child))
                        .map(|(_, owner)| owner)
                        .collect();
                    gone.sort_unstable();
                    gone.dedup();
                    return gone;
                }
            }
        }
        Vec::new()
    }

    fn lock(&self) -> MutexGuard<'_, Index<K>> {
        self.0.lock().expect("owner index lock is never poisoned")
    }
}

/// `obj`'s reference by namespace and name alone, which is all a reference is compared and
/// hashed by: without the uid and resourceVersion `ObjectRef::from_obj` copies, two strings
/// fewer in each of the two places the index keeps a child's reference.
fn key_of<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectRef<K> {
    let meta = obj.meta();
    let key = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
    match meta.namespace.as_deref() {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

struct Index<K: Resource<DynamicType = ()>> {
    live: Owners<K>,
    relisting: Option<Owners<K>>,
}

struct Owners<K: Resource<DynamicType = ()>> {
    /// Controller uid of each indexed child.
    owner_of: HashMap<ObjectRef<K>, String>,
    /// Children of each controller uid, in no order. NB: a Vec of one to begin with, not a set:
    /// an AppService controls one child of each kind, and the first insert into an empty hash
    /// set (or push onto an empty Vec) allocates room for three or four (~400 bytes here).
    owned: HashMap<String, Vec<ObjectRef<K>>>,
}

impl<K: Resource<DynamicType = ()>> Default for Owners<K> {
    fn default() -> Self {
        Self {
            owner_of: HashMap::new(),
            owned: HashMap::new(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Owners<K> {
    fn insert(&mut self, obj: &K) {
        let key = key_of(obj);
        self.remove(&key);
        let controller = obj
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true));
        if let Some(owner) = controller {
            self.owned
                .entry(owner.uid.clone())
                .or_insert_with(|| Vec::with_capacity(1))
                .push(key.clone());
            self.owner_of.insert(key, owner.uid.clone());
        }
    }

    fn remove(&mut self, key: &ObjectRef<K>) {
        let Some(owner) = self.owner_of.remove(key) else {
            return;
        };
        if let Some(children) = self.owned.get_mut(&owner) {
            children.retain(|child| child != key);
            if children.is_empty() {
                self.owned.remove(&owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;
    use kube::runtime::reflector::store::Writer;
    use serde_json::json;

    use super::*;

    fn service(name: &str, owner: Option<&str>) -> Service {
        let refs: Vec<_> = owner
            .map(|uid| json!({"apiVersion": "v1", "kind": "X", "name": "x", "uid": uid, "controller": true}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": refs},
        }))
        .expect("a valid Service")
    }

    /// A cache fed `events` through both the reflector's writer and the index.
    fn cache(events: &[watcher::Event<Service>]) -> Cache<Service> {
        let mut writer: Writer<Service> = Writer::default();
        let owners = OwnerIndex::default();
        for event in events {
            writer.apply_watcher_event(event);
            let _ = owners.apply_watcher_event(event);
        }
        Cache::new(writer.as_reader(), owners)
    }

    fn names(found: Vec<Arc<Service>>) -> Vec<String> {
        let mut names: Vec<_> = found.iter().map(|s| s.name_any()).collect();
        names.sort();
        names
    }

    #[test]
    fn children_are_found_by_their_controller() {
        use watcher::Event::*;
        let c = cache(&[
            Init,
            InitApply(service("a", Some("u1"))),
            InitApply(service("b", Some("u2"))),
            InitApply(service("free", None)),
            InitDone,
            Apply(service("c", Some("u1"))),
        ]);
        assert_eq!(names(c.controlled_by("u1")), ["a", "c"]);
        assert_eq!(names(c.controlled_by("u2")), ["b"]);
        assert!(c.controlled_by("none").is_empty());
    }

    #[test]
    fn deletions_owner_changes_and_relists_update_the_index() {
        use watcher::Event::*;
        let c = cache(&[
            Init,
            InitApply(service("a", Some("u1"))),
            InitApply(service("b", Some("u1"))),
            InitDone,
            Delete(service("a", Some("u1"))),
            Apply(service("b", Some("u2"))),
        ]);
        assert!(c.controlled_by("u1").is_empty());
        assert_eq!(names(c.controlled_by("u2")), ["b"]);

        // A re-list replaces the index only once it is done, like the store.
        let (owners, mut writer) = (c.owners.clone(), Writer::<Service>::default());
        for event in [Init, InitApply(service("d", Some("u1")))] {
            writer.apply_watcher_event(&event);
            assert!(owners.apply_watcher_event(&event).is_empty());
        }
        assert_eq!(
            owners.lock().live.owned.len(),
            1,
            "old index until InitDone"
        );
        // b (of u2) is gone from the re-list: deleted while the watch was away.
        assert_eq!(owners.apply_watcher_event(&InitDone), ["u2"]);
        writer.apply_watcher_event(&InitDone);
        let relisted = Cache::new(writer.as_reader(), owners);
        assert_eq!(names(relisted.controlled_by("u1")), ["d"]);
        assert!(relisted.controlled_by("u2").is_empty());
    }
}
