//! The record of the guests in force: a ConfigMap beside the guest ConfigMap
//! (`<name>-accepted`), written by the operator after every verdict that leaves a set in force,
//! holding exactly that set's guests (a guest pulled from a registry by its pinned reference, not
//! its bytes), signatures and canary selector.
//!
//! A new process (a restart, a new leader) puts the recorded set back in force before it reads
//! the guest ConfigMap, without a dry run, so that a candidate pushed meanwhile (and maybe
//! rejected) is judged against the guests the fleet runs, never against the base guest. The
//! recorded guests are still checked against the trusted keys and the `run` pins of the new
//! process: a revoked key or a new pin is not bypassed by the record. No record (or an empty
//! one) means the base guest.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::contents::Contents;
use crate::consts::{FIELD_MANAGER, RECORD_SUFFIX};

/// Name of the record of guest ConfigMap `guest_configmap`.
pub fn name(guest_configmap: &str) -> String {
    format!("{guest_configmap}{RECORD_SUFFIX}")
}

/// The record, read from the API server: `None` without one. Its guests by reference are
/// pulled (from the on-disk cache, mostly) and it is parsed like the guest ConfigMap.
pub async fn read(api: &Api<ConfigMap>, name: &str) -> Result<Option<ConfigMap>, kube::Error> {
    api.get_opt(name).await
}

/// Writes `contents` (its guests, signatures and canary selector) as the record `name`, with
/// server-side apply: keys of an earlier record that `contents` lacks are removed. The record
/// must exist or the operator may create ConfigMaps (config/manager creates it empty).
pub async fn write(
    api: &Api<ConfigMap>,
    name: &str,
    contents: &Contents,
) -> Result<(), kube::Error> {
    let cm = contents.to_configmap(name);
    let mut body = serde_json::to_value(&cm).expect("a ConfigMap serializes");
    body["apiVersion"] = "v1".into();
    body["kind"] = "ConfigMap".into();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(&body)).await?;
    Ok(())
}
