//! Guest call cost: a fresh Store per call through the production runtime, against the same
//! mapping compiled natively; plus compile and precompiled-load times. Prints figures.
//!
//! Then the same for the Python and JavaScript example guests (`make guests`, in
//! `target/guests/` or `$APP_OPERATOR_GUESTS_DIR`), with fewer calls: a compile, precompiled
//! loads and fresh-instance calls.
//!
//! Run with `make bench` (or `cargo bench -p app-operator --bench guest`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use app_operator::cli::render::read_app;
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator_guest::bindings::kudevops::appservice::types as native;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

const SAMPLE: &str = "../config/samples/apps_v1alpha1_appservice.yaml";
const WARMUP: usize = 1_000;
const CALLS: usize = 20_000;
const LOADS: usize = 10;
/// Alternated rounds of the fresh-Store calls, the native mapping and the output policy.
const ROUNDS: usize = 5;

/// p50, p99 and max of one contender's timed calls.
type Sample = (Duration, Duration, Duration);
/// Calls, warm-up calls and precompiled loads of each big (Python, JavaScript) guest.
const BIG_CALLS: usize = 500;
const BIG_WARMUP: usize = 20;
const BIG_LOADS: usize = 5;

fn main() {
    let app = read_app(SAMPLE.as_ref()).expect("the sample parses");
    let cache = std::env::temp_dir().join(format!("app-operator-bench-{}", std::process::id()));
    let config = guest::Config {
        cache_dir: Some(cache.clone()),
        ..guest::Config::default()
    };
    let wasm = guest::default_guest();
    println!(
        "guest runtime benchmark: sample {SAMPLE}, default guest {} bytes",
        wasm.len()
    );

    let compile = median((0..LOADS).map(|_| {
        let runtime = guest::Runtime::new(guest::Config::default()).expect("valid config");
        time(|| runtime.load_blocking(wasm).expect("compiles"))
    }));
    guest::Runtime::new(config.clone())
        .expect("valid")
        .load_blocking(wasm)
        .expect("fills the cache");
    let load = median((0..LOADS).map(|_| {
        let runtime = guest::Runtime::new(config.clone()).expect("valid config");
        time(|| runtime.load_blocking(wasm).expect("loads precompiled"))
    }));
    println!(
        "compile (Component::new + link), median of {LOADS}: {}",
        ms(compile)
    );
    println!(
        "precompiled load (read + deserialize + link), median of {LOADS}: {}",
        ms(load)
    );

    let load = |wasm: &[u8]| {
        guest::Runtime::new(guest::Config::default())
            .expect("valid")
            .load_blocking(wasm)
            .expect("loads")
    };
    let policy = load(wasm);
    // NB: `APP_OPERATOR_BENCH_GUEST` names another build of the default policy (other build
    // settings, a variant of its source), measured in the same rounds as the embedded one.
    let variant = std::env::var_os("APP_OPERATOR_BENCH_GUEST").map(|path| {
        let bytes = std::fs::read(&path).expect("reads APP_OPERATOR_BENCH_GUEST");
        println!("variant guest: {}, {} bytes", path.display(), bytes.len());
        load(&bytes)
    });
    // NB: every contender runs once per round, in turn, so that machine noise (these are shared
    // VMs) hits all of them alike; each is reported by its best round.
    let mut rounds = Rounds::default();
    for _ in 0..ROUNDS {
        rounds
            .call
            .push(percentiles(|| policy.bench_call(&app).expect("renders")));
        if let Some(variant) = &variant {
            rounds
                .variant
                .push(percentiles(|| variant.bench_call(&app).expect("renders")));
        }
        rounds.native.push(percentiles(|| {
            app_operator_guest::render::render(&to_native(&app))
                .expect("renders")
                .len()
        }));
        rounds.unadmitted.push(percentiles(|| {
            policy.bench_render_unadmitted(&app).expect("renders")
        }));
        rounds.render.push(percentiles(|| {
            policy.render_blocking(&app, None).expect("renders").len()
        }));
    }
    let native = best(&rounds.native);
    let call = best(&rounds.call);
    let (unadmitted, render) = (best(&rounds.unadmitted), best(&rounds.render));
    println!("best of {ROUNDS} alternated rounds each:");
    report(
        "guest call, fresh Store (convert + instantiate + call + drop)",
        call,
    );
    report(
        "guest call + output validation, no output policy",
        unadmitted,
    );
    report(
        "render_blocking (guest call + output validation + output policy)",
        render,
    );
    println!(
        "ratio with / without the output policy at p50: {:.2}x",
        ratio(render, unadmitted)
    );
    report(
        "native mapping (convert + same Rust code, no sandbox)",
        native,
    );
    println!(
        "ratio guest call / native at p50: {:.1}x",
        ratio(call, native)
    );
    if !rounds.variant.is_empty() {
        let variant = best(&rounds.variant);
        report("variant guest call, fresh Store", variant);
        println!(
            "ratio variant guest call / native at p50: {:.1}x; variant / embedded: {:.2}x",
            ratio(variant, native),
            ratio(variant, call)
        );
    }
    for name in ["python", "javascript"] {
        big_guest(name, &app, &cache);
    }
    let _ = std::fs::remove_dir_all(cache);
}

/// Compile, precompiled load and fresh-instance call of the example guest `name`.
fn big_guest(name: &str, app: &AppService, cache: &std::path::Path) {
    let dir = std::env::var_os("APP_OPERATOR_GUESTS_DIR")
        .map_or_else(|| "../target/guests".into(), std::path::PathBuf::from);
    let path = dir.join(format!("{name}.wasm"));
    let Ok(wasm) = std::fs::read(&path) else {
        println!(
            "{name} guest: {} missing, skipped (run `make guests`)",
            path.display()
        );
        return;
    };
    let config = guest::Config {
        cache_dir: Some(cache.to_owned()),
        ..guest::Config::default()
    };
    let hwm = peak_rss_mib();
    let compile = time(|| {
        guest::Runtime::new(config.clone())
            .expect("valid config")
            .load_blocking(&wasm)
            .expect("compiles")
    });
    println!(
        "{name} guest ({:.1} MB): compile (Component::new + link + write the cache) {}, \
         process peak RSS {hwm:.0} -> {:.0} MiB",
        wasm.len() as f64 / 1e6,
        ms(compile),
        peak_rss_mib()
    );
    let load = median((0..BIG_LOADS).map(|_| {
        let runtime = guest::Runtime::new(config.clone()).expect("valid config");
        time(|| runtime.load_blocking(&wasm).expect("loads precompiled"))
    }));
    println!(
        "{name} guest: precompiled load (read + deserialize + link), median of {BIG_LOADS}: {}",
        ms(load)
    );
    let policy = guest::Runtime::new(config)
        .expect("valid")
        .load_blocking(&wasm)
        .expect("loads");
    let call = sample(BIG_WARMUP, BIG_CALLS, || {
        policy.bench_call(app).expect("renders")
    });
    println!(
        "{name} guest: call, fresh Store (convert + instantiate + call + drop), {BIG_CALLS} calls: \
         p50 {} p99 {} max {}",
        ms(call.0),
        ms(call.1),
        ms(call.2)
    );
}

/// The process's peak resident memory so far (`VmHWM`), in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The conversion the host does for the guest, into the guest crate's native types.
fn to_native(app: &AppService) -> native::AppService {
    let pairs = |m: &Option<std::collections::BTreeMap<String, String>>| {
        m.iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    native::AppService {
        metadata: native::ObjectMeta {
            name: app.metadata.name.clone().unwrap_or_default(),
            namespace: app.metadata.namespace.clone(),
            uid: app.metadata.uid.clone(),
            generation: app.metadata.generation,
            labels: pairs(&app.metadata.labels),
            annotations: pairs(&app.metadata.annotations),
        },
        spec: native::AppServiceSpec {
            replicas: app.spec.replicas,
            image: app.spec.image.clone(),
            ports: app
                .spec
                .ports
                .iter()
                .map(|p| native::ServicePort {
                    name: p.name.clone(),
                    protocol: p.protocol.clone(),
                    port: p.port,
                    target_port: p.target_port.as_ref().map(|t| match t {
                        IntOrString::Int(n) => native::IntOrString::Int(*n),
                        IntOrString::String(s) => native::IntOrString::Str(s.clone()),
                    }),
                    node_port: p.node_port,
                    app_protocol: p.app_protocol.clone(),
                })
                .collect(),
        },
    }
}

fn time<T>(f: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    black_box(f());
    start.elapsed()
}

fn median(samples: impl Iterator<Item = Duration>) -> Duration {
    let mut v: Vec<_> = samples.collect();
    v.sort();
    v[v.len() / 2]
}

/// (p50, p99, max) of `CALLS` timed calls after `WARMUP` untimed ones.
fn percentiles(f: impl FnMut() -> usize) -> Sample {
    sample(WARMUP, CALLS, f)
}

/// (p50, p99, max) of `calls` timed calls after `warmup` untimed ones.
fn sample(warmup: usize, calls: usize, mut f: impl FnMut() -> usize) -> Sample {
    for _ in 0..warmup {
        black_box(f());
    }
    let mut v: Vec<Duration> = (0..calls).map(|_| time(&mut f)).collect();
    v.sort();
    (v[calls / 2], v[calls * 99 / 100], v[calls - 1])
}

/// Each contender's (p50, p99, max) per round.
#[derive(Default)]
struct Rounds {
    call: Vec<Sample>,
    variant: Vec<Sample>,
    native: Vec<Sample>,
    unadmitted: Vec<Sample>,
    render: Vec<Sample>,
}

/// The ratio of two samples' p50.
fn ratio(a: Sample, b: Sample) -> f64 {
    a.0.as_secs_f64() / b.0.as_secs_f64()
}

/// The round with the lowest p50.
fn best(rounds: &[Sample]) -> Sample {
    *rounds
        .iter()
        .min_by_key(|r| r.0)
        .expect("at least one round")
}

fn report(what: &str, (p50, p99, max): Sample) {
    println!(
        "{what}, {CALLS} calls: p50 {} p99 {} max {}",
        us(p50),
        us(p99),
        us(max)
    );
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
