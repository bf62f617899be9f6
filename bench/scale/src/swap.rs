//! The swap phase: with every AppService Ready, a new guest is written into the guest ConfigMap;
//! measured is the time until the operator put it in force, until every AppService's status
//! names the new guest, until every child whose output changes carries the new guest's digest
//! (re-applied through it), how many children were written, and how many reconciles failed
//! meanwhile. Two swaps, one after the other:
//!
//! 1. *same output*: the default guest with a custom section appended (a new digest, the same
//!    output): no child should be written, only each AppService's status (the provenance);
//! 2. *rollout*: the example `tiered` guest, which changes every pod template, so each
//!    Deployment also rolls out (new ReplicaSet, new pod) while the operator re-applies.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use app_operator::consts::{ANNOTATION_GUEST_DIGEST, GUEST_CONFIGMAP, GUEST_KEY};
use app_operator::guest;
use app_operator_e2e::swap::with_custom_section;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource, ResourceExt};

use crate::{Args, Stores, http_get, load_average, prom};
use app_operator_e2e::process::OperatorProcess;

/// What one swap measured.
pub(crate) struct Swap {
    /// Which swap.
    what: &'static str,
    /// The new guest.
    digest: String,
    /// From the ConfigMap write until the operator put the guest in force (after its dry run on
    /// every AppService).
    activated: Duration,
    /// From the ConfigMap write until every Deployment and Service carries the new digest; none
    /// for a swap whose output is the same.
    children: Option<Duration>,
    /// Children whose resourceVersion changed between the write and the end.
    written: usize,
    /// From the ConfigMap write until every AppService's status names the new digest.
    status: Duration,
    /// Children the operator sent to the API server as a server-side dry run of the guest.
    dry_run_applies: u64,
    /// The load averages when the ConfigMap was written and when the guest was put in force.
    load: (String, String),
    /// Reconciles that failed between the write and the end.
    failures: u64,
    /// Reconciles run between the write and the end.
    reconciles: u64,
    /// Operator peak RSS after the swap (both guests resident), KiB.
    peak_rss_kib: u64,
}

impl Swap {
    /// Prints the figures, `count` being the number of AppServices.
    pub(crate) fn print(&self, count: usize) {
        println!("guest swap, {} ({}):", self.what, self.digest);
        println!(
            "  validated and active   {:>8.1} s  (dry run on all {count} AppServices included)",
            self.activated.as_secs_f64()
        );
        println!(
            "  server-side dry run    {:>8}   children (load average {} at the write, {} when active)",
            self.dry_run_applies, self.load.0, self.load.1
        );
        if let Some(children) = self.children {
            println!(
                "  all {count} re-applied     {:>8.1} s  (every Deployment and Service carries the new digest)",
                children.as_secs_f64()
            );
        }
        println!(
            "  children written       {:>8}   (resourceVersion changed, of {} children)",
            self.written,
            2 * count
        );
        println!(
            "  all statuses updated   {:>8.1} s",
            self.status.as_secs_f64()
        );
        println!(
            "  reconciles meanwhile   {:>8}   ({} failed)",
            self.reconciles, self.failures
        );
        println!(
            "  peak RSS after swap    {:>8.1} MiB",
            self.peak_rss_kib as f64 / 1024.0
        );
    }
}

/// Both swaps, one after the other.
pub(crate) async fn run(
    client: &Client,
    args: &Args,
    ns: &str,
    operator: &mut OperatorProcess,
) -> anyhow::Result<Vec<Swap>> {
    let same_output = with_custom_section(guest::default_guest(), "bench-scale");
    let metadata = swap(
        client,
        args,
        ns,
        operator,
        "same output",
        &same_output,
        false,
    )
    .await?;
    let tiered = app_operator::testing::tiered_guest();
    let rollout = swap(client, args, ns, operator, "rollout", tiered, true).await?;
    Ok(vec![metadata, rollout])
}

/// Writes `wasm` into the guest ConfigMap of `ns` and waits for it to reach every AppService
/// (and, when `rewrites`, every child).
async fn swap(
    client: &Client,
    args: &Args,
    ns: &str,
    operator: &mut OperatorProcess,
    what: &'static str,
    wasm: &[u8],
    rewrites: bool,
) -> anyhow::Result<Swap> {
    let digest = guest::Runtime::new(guest::Config::default())?
        .load(wasm.to_vec())
        .await?
        .digest()
        .to_owned();
    let Stores {
        apps,
        deployments,
        services,
    } = Stores::watch(client, ns).await?;
    let before = counters(&args.metrics_addr).await?;
    let swaps_before = swaps(&args.metrics_addr).await?;
    let dry_run_before = dry_run_applies(&args.metrics_addr).await?;
    let load_before = load_average();
    let count = apps.state().len();
    let versions_before = versions(&deployments, &services);

    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(GUEST_CONFIGMAP.to_owned()),
            ..ObjectMeta::default()
        },
        binary_data: Some(BTreeMap::from([(
            GUEST_KEY.to_owned(),
            ByteString(wasm.to_vec()),
        )])),
        ..ConfigMap::default()
    };
    let params = PatchParams::apply("bench-scale").force();
    let started = Instant::now();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(GUEST_CONFIGMAP, &params, &Patch::Apply(&cm))
        .await?;

    let deadline = started + Duration::from_secs(args.timeout_secs);
    let (mut activated, mut children, mut status) = (None, None, None);
    let mut load_active = String::new();
    while (rewrites && children.is_none()) || status.is_none() || activated.is_none() {
        operator.check_alive()?;
        if activated.is_none() && swaps(&args.metrics_addr).await? > swaps_before {
            activated = Some(started.elapsed());
            load_active = load_average();
        }
        let carried = carrying(&deployments, &digest).min(carrying(&services, &digest));
        let reported = apps
            .state()
            .iter()
            .filter(|a| a.status.as_ref().and_then(|s| s.guest_digest.as_deref()) == Some(&digest))
            .count();
        if rewrites && children.is_none() && carried == count {
            children = Some(started.elapsed());
        }
        if status.is_none() && reported == count {
            status = Some(started.elapsed());
        }
        if Instant::now() > deadline {
            bail!(
                "swap timed out: {carried}/{count} children re-applied, {reported}/{count} statuses"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = counters(&args.metrics_addr).await?;
    let versions_after = versions(&deployments, &services);
    let written = versions_after
        .iter()
        .filter(|(child, version)| versions_before.get(*child) != Some(version))
        .count();
    Ok(Swap {
        what,
        digest,
        activated: activated.expect("loop ends when set"),
        children,
        written,
        status: status.expect("loop ends when set"),
        dry_run_applies: dry_run_applies(&args.metrics_addr).await? - dry_run_before,
        load: (load_before, load_active),
        failures: after.1 - before.1,
        reconciles: after.0 - before.0,
        peak_rss_kib: operator.peak_rss_kib()?,
    })
}

/// `(kind, name) -> resourceVersion` of every cached child.
fn versions(
    deployments: &Store<Deployment>,
    services: &Store<Service>,
) -> BTreeMap<(&'static str, String), String> {
    let of = |kind: &'static str, meta: &ObjectMeta| {
        let version = meta.resource_version.clone().unwrap_or_default();
        ((kind, meta.name.clone().unwrap_or_default()), version)
    };
    let deployments = deployments.state();
    let services = services.state();
    deployments
        .iter()
        .map(|d| of("Deployment", &d.metadata))
        .chain(services.iter().map(|s| of("Service", &s.metadata)))
        .collect()
}

/// How many objects in `store` carry guest digest `digest`.
fn carrying<K: Resource<DynamicType = ()> + Clone + 'static>(
    store: &Store<K>,
    digest: &str,
) -> usize {
    store
        .state()
        .iter()
        .filter(|o| {
            o.annotations()
                .get(ANNOTATION_GUEST_DIGEST)
                .map(String::as_str)
                == Some(digest)
        })
        .count()
}

/// Guest sets the operator has put in force, from its metrics.
async fn swaps(metrics_addr: &str) -> anyhow::Result<u64> {
    let text = http_get(metrics_addr, "/metrics").await?;
    Ok(prom::sum(&text, "app_operator_guest_swaps_total", "") as u64)
}

/// Children sent as a server-side dry run of a candidate guest, from the operator's metrics.
async fn dry_run_applies(metrics_addr: &str) -> anyhow::Result<u64> {
    let text = http_get(metrics_addr, "/metrics").await?;
    Ok(prom::sum(&text, "app_operator_guest_dry_run_applies_total", "") as u64)
}

/// `(reconciles, failed reconciles)` from the operator's metrics.
async fn counters(metrics_addr: &str) -> anyhow::Result<(u64, u64)> {
    let text = http_get(metrics_addr, "/metrics").await?;
    Ok((
        prom::sum(&text, "app_operator_reconciles_total", "") as u64,
        prom::sum(&text, "app_operator_reconcile_errors_total", "") as u64,
    ))
}

#[cfg(test)]
mod tests {
    use app_operator::guest;

    use super::with_custom_section;

    #[test]
    fn a_custom_section_gives_the_same_guest_another_digest() -> anyhow::Result<()> {
        let runtime = guest::Runtime::new(guest::Config::default())?;
        let original = runtime.load_default_blocking()?;
        let marked =
            runtime.load_blocking(&with_custom_section(guest::default_guest(), "bench-scale"))?;
        assert_ne!(marked.digest(), original.digest());
        let app = app_operator_e2e::appservice::sample();
        assert_eq!(
            marked.render_blocking(&app, None)?,
            original.render_blocking(&app, None)?
        );
        Ok(())
    }
}
