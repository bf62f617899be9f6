//! `app-operator plan --guest <file.wasm>`: renders every live AppService through a candidate
//! guest and shows what the controller would do: the children it would create or change (a
//! diff with the live child), those it would delete, and what the guest or the API server
//! refuses. Writes nothing: each child goes through the same server-side dry run as a swap
//! ([`server_dry_run`]), so the diff includes the API server's defaults and its validation. An
//! AppService that fails its CRD's checks ([`Validator`]) is reported as invalid, the guest is
//! not called for it, and `plan` exits non-zero after printing the plan.

mod model;

use std::path::PathBuf;

use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DynamicObject, ListParams, ObjectMeta};
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;

pub use self::model::{Action, AppPlan, ChildPlan, Plan, Summary};
use super::Connection;
use crate::controller::apply::{ChildKind, keep, orphans_among, ownership};
use crate::crd::AppService;
use crate::guest::{self, DesiredObject, admission::Level};
use crate::swap::server_dry_run;
use crate::validation::Validator;
use crate::{Error, Result, error_chain, namespaces, stamp};

/// How `plan` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// A diff per child and a summary line.
    #[default]
    Text,
    /// One JSON document ([`Plan`]).
    Json,
}

/// Arguments of `app-operator plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The candidate guest component (`.wasm`), or a reference pinned by digest
    /// (`registry/repository@sha256:<hex>`, pulled and verified).
    #[arg(long)]
    pub guest: PathBuf,
    /// Only AppServices in this namespace. Default: all namespaces.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// How to print the plan.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The output policy, as the operator's flags set it.
    #[command(flatten)]
    pub policy: super::PolicyArgs,
    /// Which cluster to connect to.
    #[command(flatten)]
    pub connection: Connection,
    /// How to reach the registry, for a guest given by reference.
    #[command(flatten)]
    pub registry: super::registry::RegistryArgs,
}

/// Runs the subcommand: prints the plan on stdout.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let wasm = super::registry::read_guest(&args.guest, &args.registry).await?;
    let config = guest::Config {
        output: args.policy.config(),
        ..guest::Config::default()
    };
    let policy = guest::Runtime::new(config)?.load(wasm).await?;
    let client = args.connection.client(None).await?;
    let plan = plan(&client, &policy, args.namespace.as_deref()).await?;
    match args.output {
        Output::Text => print!("{}", plan.text()),
        Output::Json => println!(
            "{}",
            // NB: the plan is strings, numbers and enums; serializing it cannot fail.
            serde_json::to_string_pretty(&plan).expect("a plan serializes to JSON")
        ),
    }
    match plan.invalid() {
        0 => Ok(()),
        n => Err(Error::Input(format!(
            "{n} AppServices are not valid against the CRD; the guest was not called for them"
        ))),
    }
}

/// The plan for every AppService (in `namespace`, or all) under `policy`. Fails only when the
/// AppServices, their namespaces or the managed children cannot be listed; a failure about one
/// child is reported in the plan ([`Action::Error`]) and the plan goes on.
pub async fn plan(
    client: &Client,
    policy: &guest::Policy,
    namespace: Option<&str>,
) -> Result<Plan> {
    let apps = crate::scope::api::<AppService>(client, namespace)
        .list(&ListParams::default())
        .await
        .map_err(Error::listing_apps)?;
    let namespaces = apps
        .items
        .iter()
        .filter_map(|a| a.metadata.namespace.as_deref());
    let levels = namespaces::lookup(client, namespaces)
        .await
        .map_err(Error::Namespaces)?;
    let owned = managed_children(client, namespace).await?;
    let plans = stream::iter(&apps.items)
        .map(|app| {
            let level = app
                .namespace()
                .and_then(|ns| levels.get(&ns).copied().flatten());
            plan_app(client, policy, app, level, &owned)
        })
        .buffered(server_dry_run::CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    Ok(Plan::new(policy.digest().to_owned(), plans))
}

/// The Deployments and Services the controller manages (its watches' label selector), by
/// metadata: where [`orphans_among`] looks for deletions.
async fn managed_children(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<(ChildKind, ObjectMeta)>> {
    let params = ListParams::default().labels(&crate::stamp::managed_selector());
    let list_err = |kind: ChildKind| {
        move |source| Error::ListChildren {
            kind: kind.as_str(),
            source,
        }
    };
    let deployments = crate::scope::api::<Deployment>(client, namespace)
        .list_metadata(&params)
        .await
        .map_err(list_err(ChildKind::Deployment))?;
    let services = crate::scope::api::<Service>(client, namespace)
        .list_metadata(&params)
        .await
        .map_err(list_err(ChildKind::Service))?;
    let deployments = deployments
        .items
        .into_iter()
        .map(|d| (ChildKind::Deployment, d.metadata));
    let services = services
        .items
        .into_iter()
        .map(|s| (ChildKind::Service, s.metadata));
    Ok(deployments.chain(services).collect())
}

/// The plan for one AppService: its children as rendered, then the deletions.
async fn plan_app(
    client: &Client,
    policy: &guest::Policy,
    app: &AppService,
    level: Option<Level>,
    owned: &[(ChildKind, ObjectMeta)],
) -> AppPlan {
    let ns = app.namespace().unwrap_or_default();
    let mut plan = AppPlan {
        namespace: ns.clone(),
        name: app.name_any(),
        error: None,
        invalid: false,
        children: Vec::new(),
    };
    // NB: a stored AppService can fail today's CRD (one stored before a rule was added); the
    // guest is not asked about an AppService the API server would refuse as it is.
    let object = serde_json::to_value(app).unwrap_or_default();
    if let Err(invalid) = Validator::app_service().validate(&object) {
        plan.error = Some(format!(
            "not a valid AppService (the API server would refuse it as it is): {invalid}"
        ));
        plan.invalid = true;
        return plan;
    }
    let objects = match policy.render(app, level).await {
        Ok(objects) => objects,
        Err(err) => {
            plan.error = Some(error_chain(&err));
            return plan;
        }
    };
    let stamped = stamp::children(app, policy.digest(), objects.clone());
    for object in &stamped {
        plan.children
            .push(plan_child(client, &ns, app, object).await);
    }
    let keep = keep(&objects);
    let found = owned.iter().map(|(kind, meta)| (*kind, meta));
    for (kind, name, _) in orphans_among(found, app, &keep) {
        plan.children.push(ChildPlan {
            kind: kind.as_str().to_owned(),
            name,
            action: Action::Delete,
            diff: String::new(),
            message: None,
        });
    }
    plan
}

/// What the controller would do with one stamped child of `app`: refuse it when it exists and
/// `app` may not write it ([`ownership`]), else what the server-side dry run says.
async fn plan_child(
    client: &Client,
    ns: &str,
    app: &AppService,
    object: &DesiredObject,
) -> ChildPlan {
    let child = |action, diff, message| ChildPlan {
        kind: object.kind.clone(),
        name: object.name.clone(),
        action,
        diff,
        message,
    };
    let live = match server_dry_run::get(client, ns, object).await {
        Ok(live) => live,
        Err(err) => return child(Action::Error, String::new(), Some(error_chain(&err))),
    };
    if let Some(Err(owner)) = live.as_ref().map(|l| ownership(l.meta(), app)) {
        let message = format!(
            "{} {} exists and is not controlled by this AppService ({owner}); the controller \
             leaves it untouched",
            object.kind, object.name
        );
        return child(Action::Refused, String::new(), Some(message));
    }
    match server_dry_run::apply(client, ns, object).await {
        Ok(planned) => {
            let action = match &live {
                None => Action::Create,
                Some(_) => Action::Change,
            };
            let old = live.map(comparable);
            let new = comparable(planned);
            // NB: the controller rewrites no child for the guest digest alone; neither does the
            // plan. A child that changes otherwise shows the new digest too.
            let same = old.as_ref().is_some_and(|old| {
                stamp::without_provenance(old) == stamp::without_provenance(&new)
            });
            let title = format!("live {}/{} {ns}", object.kind, object.name);
            let diff = match same {
                true => String::new(),
                false => diff(&yaml(old.as_ref()), &yaml(Some(&new)), &title),
            };
            let action = if diff.is_empty() {
                Action::Unchanged
            } else {
                action
            };
            child(action, diff, None)
        }
        Err(err) if err.is_transient() => {
            child(Action::Error, String::new(), Some(error_chain(&err)))
        }
        Err(err) => child(Action::Refused, String::new(), Some(error_chain(&err))),
    }
}

/// The object without what changes on every write (managed fields, versions, status).
fn comparable(object: DynamicObject) -> Value {
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
    value
}

/// `value` as YAML; nothing for no value.
fn yaml(value: Option<&Value>) -> String {
    value
        .map(|v| serde_yaml_ng::to_string(v).unwrap_or_default())
        .unwrap_or_default()
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
