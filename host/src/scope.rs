//! Where the operator works: one namespace, or all of them.

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource};

/// The `K`s of `namespace`, or of every namespace when it is `None`.
pub fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
