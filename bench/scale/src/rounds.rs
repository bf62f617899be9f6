//! Rounds side by side: in each, the Go seed operator, the kube-rs floor (when built) and
//! app-operator create the children of the same COUNT AppServices, each alone on the cluster in a
//! fresh namespace of its own, and so does the cluster's [limit](crate::limit) (the benchmark
//! writing the children and statuses itself, with no operator); the order alternates (odd
//! rounds: Go seed, floor, app-operator, limit; even rounds the reverse). A table per round,
//! then the median of each figure over the rounds and the ratios to the Go seed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator_e2e::TestNamespace;
use kube::Client;

use crate::contender::Contender;
use crate::control_plane;
use crate::limit;
use crate::prom::{self, METHODS};
use crate::{Args, Stores, create_apps, delete_namespace, http_get, load_average};
use app_operator_e2e::process::OperatorProcess;

/// The contenders, in the order of round 1; the index of each in [`Runs`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    GoSeed = 0,
    Floor = 1,
    Ours = 2,
    /// No operator: the benchmark writes what an operator must ([`limit`]).
    Limit = 3,
}

impl Which {
    /// The contender's name, as [`Contender`] has it.
    fn name(self) -> &'static str {
        match self {
            Which::GoSeed => "go-seed",
            Which::Floor => "kube-rs-floor",
            Which::Ours => "app-operator",
            Which::Limit => "limit",
        }
    }
}

/// Each contender's figures, one per round it ran, indexed by [`Which`].
type Runs = [Vec<Figures>; 4];

/// What one contender's run measured, each figure read when the last of the times is reached.
struct Figures {
    /// Until every AppService has its Deployment and Service.
    children: Duration,
    /// Until every AppService has a status with observedGeneration = generation; `None` for an
    /// operator that writes no status.
    statuses: Option<Duration>,
    /// The operator process's own figures; `None` for the limit, which has none.
    process: Option<Process>,
    /// API requests by method, in the order of [`METHODS`].
    requests: [u64; 5],
    /// Writes by method and resource (`"PATCH deployments"`); empty for the Go seed, whose
    /// counter has no resource label.
    writes: BTreeMap<String, u64>,
    /// CPU seconds the control plane's processes used from the creation of the AppServices
    /// until every child existed.
    control_plane_children: f64,
    /// The same, by component, until the run's end (children and, for app-operator, statuses).
    control_plane: control_plane::Sample,
}

/// What one operator process used.
struct Process {
    /// CPU seconds (user + system) the operator used from its start, with its waited children.
    cpu_secs: f64,
    /// Of those, the CPU seconds used until its `/readyz` answered, before any AppService
    /// existed: start-up (for app-operator, compiling its guest), a fixed cost per start.
    ready_cpu_secs: f64,
    /// Peak RSS (VmHWM), KiB.
    peak_rss_kib: u64,
    /// Resident anonymous memory (heap, stacks) and pages of files (the binary's code and
    /// data, shared libraries) when the run ended, KiB: what the peak is made of, as RSS grows
    /// throughout a burst.
    rss_at_end_kib: RssParts,
}

/// When every child and every status existed, and the control plane's CPU until then.
struct Times {
    /// Until every AppService has its Deployment and Service.
    children: Duration,
    /// Until every AppService has a status for its generation, if the contender writes one.
    statuses: Option<Duration>,
    /// The control plane's CPU seconds until every child existed.
    control_plane_children: f64,
    /// The same, by component, until the end (children and statuses).
    control_plane: control_plane::Sample,
}

/// Parts of a process's resident memory, KiB.
struct RssParts {
    /// `RssAnon`: heap, stacks, other private memory.
    anon: u64,
    /// `RssFile`: pages of mapped files (the binary, shared libraries).
    file: u64,
}

/// Runs `args.rounds` rounds with the Go seed binary `go_seed` (and the kube-rs floor when
/// `args.floor` names it) and prints a table per round and the summary.
pub(crate) async fn run(
    client: &Client,
    args: &Args,
    apps: &[AppService],
    go_seed: &Path,
) -> anyhow::Result<()> {
    let load_start = load_average();
    let mut runs: Runs = Default::default();
    let contenders: Vec<Which> = [Which::GoSeed, Which::Floor, Which::Ours, Which::Limit]
        .into_iter()
        .filter(|w| *w != Which::Floor || args.floor.is_some())
        .collect();
    for round in 1..=args.rounds {
        let mut order = contenders.clone();
        if round % 2 == 0 {
            order.reverse();
        }
        let load = load_average();
        for &which in &order {
            let figures = one(client, args, apps, go_seed, which, round).await?;
            runs[which as usize].push(figures);
        }
        println!(
            "round {round} of {} ({} first; load average {load} at the start):",
            args.rounds,
            order[0].name()
        );
        print_table(
            runs.each_ref().map(|r| &r[r.len().saturating_sub(1)..]),
            apps.len(),
            false,
        );
    }
    println!(
        "summary: median over {} round(s) of {} AppServices ({} in flight); ratio = contender / go-seed",
        args.rounds, args.count, args.concurrency
    );
    print_table(runs.each_ref().map(Vec::as_slice), apps.len(), true);
    println!(
        "  load average: {load_start} at the start, {} at the end",
        load_average()
    );
    Ok(())
}

/// One contender's run in a namespace of its own: start, ready, create, measure, SIGTERM, then
/// the namespace deleted and gone.
async fn one(
    client: &Client,
    args: &Args,
    apps: &[AppService],
    go_seed: &Path,
    which: Which,
    round: usize,
) -> anyhow::Result<Figures> {
    let ns = TestNamespace::create(client, "bench-rounds").await?;
    let contender = match which {
        Which::GoSeed => Contender::go_seed(go_seed, args, ns.name()),
        Which::Floor => Contender::floor(
            args.floor
                .as_deref()
                .expect("the floor runs only when given"),
            args,
            ns.name(),
        ),
        Which::Ours => Contender::app_operator(args, ns.name()),
        Which::Limit => {
            let figures = measure_limit(client, args, ns.name(), apps).await;
            return after(client, ns, which, round, figures).await;
        }
    };
    let log = format!("bench-scale-round{round}-{}.log", contender.name);
    let mut operator = contender.spawn(Path::new(&log))?;
    let figures = measure(client, args, ns.name(), apps, &contender, &mut operator).await;
    operator.terminate_timed().await?;
    after(client, ns, which, round, figures).await
}

/// After a contender's run: its namespace deleted and waited for until gone, then `figures`.
async fn after(
    client: &Client,
    ns: TestNamespace,
    which: Which,
    round: usize,
    figures: anyhow::Result<Figures>,
) -> anyhow::Result<Figures> {
    let deleted = delete_namespace(client, ns).await?;
    eprintln!(
        "  round {round}, {}: done; namespace gone {:.1} s after its deletion",
        which.name(),
        deleted.as_secs_f64()
    );
    figures
}

async fn measure(
    client: &Client,
    args: &Args,
    ns: &str,
    apps: &[AppService],
    contender: &Contender,
    operator: &mut OperatorProcess,
) -> anyhow::Result<Figures> {
    operator.wait_ready(Duration::from_secs(60)).await?;
    let ready_cpu_secs = operator.cpu_seconds()?;
    let stores = Stores::watch(client, ns).await?;
    let control_plane_start = control_plane::Sample::take()?;
    let started = Instant::now();
    create_apps(client, ns, apps.to_vec(), args.concurrency).await?;
    let times = until_written(
        &stores,
        args,
        (contender.name, contender.writes_status),
        (started, &control_plane_start),
        || operator.check_alive(),
    )
    .await?;
    let process = Process {
        cpu_secs: operator.cpu_seconds()?,
        ready_cpu_secs,
        peak_rss_kib: operator.peak_rss_kib()?,
        rss_at_end_kib: RssParts {
            anon: operator.status_kib("RssAnon")?,
            file: operator.status_kib("RssFile")?,
        },
    };
    let metrics = http_get(&contender.metrics_addr, "/metrics").await?;
    Ok(Figures {
        children: times.children,
        statuses: times.statuses,
        process: Some(process),
        requests: prom::by_method(&metrics, contender.requests_metric),
        writes: prom::writes_by_resource(&metrics, contender.requests_metric),
        control_plane_children: times.control_plane_children,
        control_plane: times.control_plane,
    })
}

/// The [`limit`]'s run in `ns`: the default guest loaded in this process, then the AppServices
/// created and their children and statuses written by the benchmark, timed as an operator's.
async fn measure_limit(
    client: &Client,
    args: &Args,
    ns: &str,
    apps: &[AppService],
) -> anyhow::Result<Figures> {
    let runtime = guest::Runtime::new(guest::Config::default())?;
    let policy = runtime.load_default().await?;
    let stores = Stores::watch(client, ns).await?;
    let control_plane_start = control_plane::Sample::take()?;
    let started = Instant::now();
    let written = limit::write(
        client.clone(),
        ns.to_owned(),
        apps.to_vec(),
        policy,
        args.concurrency,
    );
    let watched = until_written(
        &stores,
        args,
        ("limit", true),
        (started, &control_plane_start),
        || Ok(()),
    );
    let ((), times) = tokio::try_join!(written, watched)?;
    let count = apps.len() as u64;
    let mut requests = [0; 5];
    let patch = METHODS.iter().position(|m| *m == "PATCH");
    requests[patch.expect("PATCH is a method")] = count * limit::WRITES.len() as u64;
    Ok(Figures {
        children: times.children,
        statuses: times.statuses,
        process: None,
        requests,
        writes: limit::WRITES
            .iter()
            .map(|w| ((*w).to_owned(), count))
            .collect(),
        control_plane_children: times.control_plane_children,
        control_plane: times.control_plane,
    })
}

/// Watches `stores` until every AppService of the round has its children and, when `contender`
/// (name, writes a status) writes one, a status for its generation; times from `since` (the
/// start, the control plane's CPU then). `alive` fails when the contender died.
async fn until_written(
    stores: &Stores,
    args: &Args,
    contender: (&str, bool),
    since: (Instant, &control_plane::Sample),
    mut alive: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Times> {
    let ((name, writes_status), (started, control_plane_start)) = (contender, since);
    let count = args.count;
    let deadline = started + Duration::from_secs(args.timeout_secs);
    let (mut children, mut statuses) = (None, None);
    let mut control_plane_children = None;
    loop {
        alive()?;
        let with_children = stores.with_children();
        let observed = stores
            .apps
            .state()
            .iter()
            .filter(|a| {
                a.status
                    .as_ref()
                    .is_some_and(|s| s.observed_generation == a.metadata.generation)
            })
            .count();
        if children.is_none() && with_children == count {
            children = Some(started.elapsed());
            control_plane_children =
                Some(control_plane::Sample::take()?.since(control_plane_start));
        }
        if statuses.is_none() && observed == count {
            statuses = Some(started.elapsed());
        }
        if children.is_some() && (statuses.is_some() || !writes_status) {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "{name}: timed out: {with_children}/{count} with children, {observed}/{count} statuses"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Times {
        children: children.expect("loop ends when set"),
        statuses: statuses.filter(|_| writes_status),
        control_plane_children: control_plane_children.expect("loop ends when set").total(),
        control_plane: control_plane::Sample::take()?.since(control_plane_start),
    })
}

/// Prints the median of each figure over each contender's `runs` (one round: its figures) for
/// `count` AppServices, a contender that did not run (or a figure it does not have) shown
/// `-`, and with `ratio` the ratios app-operator / go-seed, kube-rs floor / go-seed and limit /
/// go-seed.
fn print_table(runs: [&[Figures]; 4], count: usize, ratio: bool) {
    let [go, floor, ours, limit] = runs;
    println!(
        "  {:<28}{:>12}{:>15}{:>14}{:>10}{}",
        "",
        "go-seed",
        "kube-rs-floor",
        "app-operator",
        "limit",
        if ratio {
            "   ours/go  floor/go  limit/go"
        } else {
            ""
        }
    );
    let row = |label: &str, unit: Unit, of: &dyn Fn(&Figures) -> Option<f64>| {
        let [g, f, o, l] = [go, floor, ours, limit].map(|r| median(r.iter().map(of)));
        let over_go = |x: Option<f64>| match (g, x) {
            (Some(g), Some(x)) if g > 0.0 => format!("{:>10.2}", x / g),
            _ => format!("{:>10}", "-"),
        };
        let ratios = if ratio {
            format!("{}{}{}", over_go(o), over_go(f), over_go(l))
        } else {
            String::new()
        };
        println!(
            "  {label:<28}{:>12}{:>15}{:>14}{:>10}{ratios}",
            unit.show(g),
            unit.show(f),
            unit.show(o),
            unit.show(l)
        );
    };
    row("all children exist", Unit::Secs, &|f| {
        Some(f.children.as_secs_f64())
    });
    row("all statuses observed", Unit::Secs, &|f| {
        f.statuses.map(|d| d.as_secs_f64())
    });
    if ratio {
        let g = median(go.iter().map(|f| Some(f.children.as_secs_f64())));
        for (name, runs, column) in [("app-operator", ours, 0), ("limit", limit, 20)] {
            let s = median(runs.iter().map(|f| f.statuses.map(|d| d.as_secs_f64())));
            if let (Some(g), Some(s)) = (g, s) {
                let label = format!("  {name} statuses / go-seed children");
                println!("  {label:<79}{:>w$.2}", s / g, w = 10 + column);
            }
        }
    }
    let process = |of: fn(&Process) -> f64| move |f: &Figures| f.process.as_ref().map(of);
    row("operator CPU", Unit::CpuSecs, &process(|p| p.cpu_secs));
    row(
        "  until ready (start-up)",
        Unit::CpuSecs,
        &process(|p| p.ready_cpu_secs),
    );
    row(
        "  from ready (the work)",
        Unit::CpuSecs,
        &process(|p| p.cpu_secs - p.ready_cpu_secs),
    );
    row(
        "peak RSS",
        Unit::Mib,
        &process(|p| p.peak_rss_kib as f64 / 1024.0),
    );
    row(
        "  anonymous at the end",
        Unit::Mib,
        &process(|p| p.rss_at_end_kib.anon as f64 / 1024.0),
    );
    row(
        "  file-backed at the end",
        Unit::Mib,
        &process(|p| p.rss_at_end_kib.file as f64 / 1024.0),
    );
    row("API requests", Unit::Count, &|f| {
        Some(f.requests.iter().sum::<u64>() as f64)
    });
    for (i, method) in METHODS.iter().enumerate() {
        row(&format!("  {method}"), Unit::Count, &|f| {
            Some(f.requests[i] as f64)
        });
    }
    let get = METHODS.iter().position(|m| *m == "GET");
    row("writes per AppService", Unit::Ratio, &|f| {
        let reads = get.map_or(0, |i| f.requests[i]);
        Some((f.requests.iter().sum::<u64>() - reads) as f64 / count.max(1) as f64)
    });
    row("control-plane CPU: children", Unit::CpuSecs, &|f| {
        Some(f.control_plane_children)
    });
    row("control-plane CPU: to end", Unit::CpuSecs, &|f| {
        Some(f.control_plane.total())
    });
    for component in every(&runs, |f| f.control_plane.names()) {
        row(&format!("  {component}"), Unit::CpuSecs, &|f| {
            f.control_plane.of(component)
        });
    }
    for kind in every(&runs, |f| f.writes.keys()) {
        row(&format!("  {kind}"), Unit::Ratio, &|f| {
            let n = f.writes.get(kind).copied().unwrap_or(0);
            (!f.writes.is_empty()).then(|| n as f64 / count.max(1) as f64)
        });
    }
}

/// The keys `of` gives for any figures of any contender, once each, in order.
fn every<'a, K: Ord, I: Iterator<Item = K>>(
    runs: &[&'a [Figures]; 4],
    of: impl Fn(&'a Figures) -> I,
) -> BTreeSet<K> {
    runs.iter().flat_map(|r| r.iter()).flat_map(of).collect()
}

/// How a figure is shown.
#[derive(Clone, Copy)]
enum Unit {
    Secs,
    CpuSecs,
    Mib,
    Count,
    /// A count per AppService.
    Ratio,
}

impl Unit {
    /// `value` with its unit, or `-` when there is none.
    fn show(self, value: Option<f64>) -> String {
        let Some(v) = value else {
            return "-".to_owned();
        };
        match self {
            Unit::Secs => format!("{v:.1} s"),
            Unit::CpuSecs => format!("{v:.2} s"),
            Unit::Mib => format!("{v:.1} MiB"),
            Unit::Count => format!("{v:.0}"),
            Unit::Ratio => format!("{v:.2}"),
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when there are
/// none or any is `None`.
fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut values = values.into_iter().collect::<Option<Vec<f64>>>()?;
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians_take_the_middle_or_the_mean_of_the_middle_two() {
        assert_eq!(median([Some(3.0), Some(1.0), Some(2.0)]), Some(2.0));
        assert_eq!(median([Some(4.0), Some(1.0)]), Some(2.5));
        assert_eq!(median([Some(4.0), None]), None);
        assert_eq!(median([]), None);
    }
}
