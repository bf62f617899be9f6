//! Guest call cost: a fresh Store per call through the production runtime, against the same
//! mapping compiled natively; plus compile and precompiled-load times. Prints figures.
//!
//! Run with `make bench` (or `cargo bench -p app-operator --bench guest`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use app_operator::cli::render::read_app;
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator_guest::kudevops::appservice::types as native;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

const SAMPLE: &str = "../config/samples/apps_v1alpha1_appservice.yaml";
const WARMUP: usize = 1_000;
const CALLS: usize = 20_000;
const LOADS: usize = 10;
/// Alternated rounds of the with/without output policy comparison.
const ROUNDS: usize = 3;

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
        time(|| runtime.load(wasm).expect("compiles"))
    }));
    guest::Runtime::new(config.clone())
        .expect("valid")
        .load(wasm)
        .expect("fills the cache");
    let load = median((0..LOADS).map(|_| {
        let runtime = guest::Runtime::new(config.clone()).expect("valid config");
        time(|| runtime.load(wasm).expect("loads precompiled"))
    }));
    println!(
        "compile (Component::new + link), median of {LOADS}: {}",
        ms(compile)
    );
    println!(
        "precompiled load (read + deserialize + link), median of {LOADS}: {}",
        ms(load)
    );

    let policy = guest::Runtime::new(guest::Config::default())
        .expect("valid")
        .load(wasm)
        .expect("loads");
    let call = percentiles(|| policy.bench_call(&app).expect("renders"));
    // NB: alternated in blocks so that machine noise hits both sides of the ratio alike.
    let (mut unadmitted, mut render) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        unadmitted.push(percentiles(|| {
            policy.bench_render_unadmitted(&app).expect("renders")
        }));
        render.push(percentiles(|| {
            policy.render_blocking(&app, None).expect("renders").len()
        }));
    }
    let (unadmitted, render) = (best(&unadmitted), best(&render));
    let native = percentiles(|| {
        app_operator_guest::render::render(&to_native(&app))
            .expect("renders")
            .len()
    });
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
        "ratio with / without the output policy at p50: {:.2}x (best of {ROUNDS} alternated rounds each)",
        render.0.as_secs_f64() / unadmitted.0.as_secs_f64()
    );
    report(
        "native mapping (convert + same Rust code, no sandbox)",
        native,
    );
    println!(
        "ratio guest call / native at p50: {:.1}x",
        call.0.as_secs_f64() / native.0.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(cache);
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
fn percentiles(mut f: impl FnMut() -> usize) -> (Duration, Duration, Duration) {
    for _ in 0..WARMUP {
        black_box(f());
    }
    let mut v: Vec<Duration> = (0..CALLS).map(|_| time(&mut f)).collect();
    v.sort();
    (v[CALLS / 2], v[CALLS * 99 / 100], v[CALLS - 1])
}

/// The round with the lowest p50.
fn best(rounds: &[(Duration, Duration, Duration)]) -> (Duration, Duration, Duration) {
    *rounds
        .iter()
        .min_by_key(|r| r.0)
        .expect("at least one round")
}

fn report(what: &str, (p50, p99, max): (Duration, Duration, Duration)) {
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
