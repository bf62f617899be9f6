//! `app-operator plan --guest <file.wasm>`: renders every live AppService through a candidate
//! guest and prints the difference with the live children. Writes nothing: each child is sent
//! as a server-side apply dry run, so the diff includes the API server's defaults.

use std::path::PathBuf;

use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::Connection;
use crate::consts::FIELD_MANAGER;
use crate::controller;
use crate::crd::AppService;
use crate::guest::{self, DesiredObject};
use crate::{Error, Result, error_chain, namespaces, stamp};

/// Arguments of `app-operator plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The candidate guest component (`.wasm`).
    #[arg(long)]
    pub guest: PathBuf,
    /// Only AppServices in this namespace. Default: all namespaces.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The output policy, as the operator's flags set it.
    #[command(flatten)]
    pub policy: super::PolicyArgs,
    /// Which cluster to connect to.
    #[command(flatten)]
    pub connection: Connection,
}

/// Runs the subcommand: prints a unified-style diff per child on stdout, and a summary line.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let wasm = super::render::read(&args.guest)?;
    let config = guest::Config {
        output: args.policy.config(),
        ..guest::Config::default()
    };
    let policy = guest::Runtime::new(config)?.load(&wasm)?;
    let client = args.connection.client(None).await?;
    let out = plan(&client, &policy, args.namespace.as_deref()).await?;
    print!("{out}");
    Ok(())
}

/// The plan for every AppService (in `namespace`, or all) under `policy`, as text.
pub async fn plan(
    client: &Client,
    policy: &guest::Policy,
    namespace: Option<&str>,
) -> Result<String> {
    let apps: Api<AppService> = controller::api(client, namespace);
    let apps = apps
        .list(&ListParams::default())
        .await
        .map_err(Error::CrdNotInstalled)?;
    let namespaces = apps
        .items
        .iter()
        .filter_map(|a| a.metadata.namespace.as_deref());
    let levels = namespaces::lookup(client, namespaces)
        .await
        .map_err(Error::Namespaces)?;
    let mut out = format!("# plan for guest {}\n", policy.digest());
    let (mut changed, mut failed) = (0, 0);
    for app in &apps.items {
        let ns = app.namespace().unwrap_or_default();
        let level = levels.get(&ns).copied().flatten();
        let objects = match policy.render(app, level).await {
            Ok(objects) => stamp::stamp(app, policy.digest(), objects),
            Err(err) => {
                failed += 1;
                out.push_str(&format!(
                    "! AppService {ns}/{}: {}\n",
                    app.name_any(),
                    error_chain(&err)
                ));
                continue;
            }
        };
        for object in &objects {
            let (live, planned) = compare(client, &ns, object).await?;
            if live != planned {
                changed += 1;
                let title = format!("live {}/{} {ns}", object.kind, object.name);
                out.push_str(&diff(&live, &planned, &title));
            }
        }
    }
    out.push_str(&format!(
        "# {} AppServices: {changed} children would change, {failed} AppServices fail\n",
        apps.items.len()
    ));
    Ok(out)
}

/// The live child and the child after a dry-run apply, as comparable YAML.
async fn compare(client: &Client, ns: &str, object: &DesiredObject) -> Result<(String, String)> {
    let (group, version) = match object.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", object.api_version.as_str()),
    };
    let gvk = kube::core::GroupVersionKind::gvk(group, version, &object.kind);
    let resource = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let apply_err = |source| Error::Apply {
        kind: "child",
        name: object.name.clone(),
        source,
    };
    let live = api.get_opt(&object.name).await.map_err(apply_err)?;
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let planned = api
        .patch(&object.name, &params, &Patch::Apply(&object.body))
        .await
        .map_err(apply_err)?;
    Ok((
        live.map(comparable).unwrap_or_default(),
        comparable(planned),
    ))
}

/// YAML of the object without what changes on every write (managed fields, versions, status).
fn comparable(object: DynamicObject) -> String {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in [
                "managedFields",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "uid",
            ] {
                meta.remove(key);
            }
        }
    }
    serde_yaml_ng::to_string(&value).unwrap_or_default()
}

/// A unified diff from `old` (the live child) to `new` (the planned one), headed `--- <title>`
/// and `+++ planned`, with two lines of context around each change.
pub fn diff(old: &str, new: &str, title: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(title, "planned")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::diff;

    #[test]
    fn diff_is_unified_with_context() {
        let out = diff(
            "a\nb\nc\nd\ne\nf\n",
            "a\nb\nc\nx\ne\nf\n",
            "live Deployment/web ns",
        );
        assert_eq!(
            out,
            "--- live Deployment/web ns\n+++ planned\n@@ -2,5 +2,5 @@\n b\n c\n-d\n+x\n e\n f\n"
        );
        assert_eq!(diff("same\n", "same\n", "t"), "");
    }
}
