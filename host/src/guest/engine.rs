//! The wasmtime engine: every non-default setting in one place, and the epoch ticker.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::Duration;

use wasmtime::{Engine, EngineWeak, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::{Config, Error};

/// Epoch period: the granularity of deadlines. A looping guest is stopped at most one tick after
/// its deadline.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Linear memory a pool slot keeps resident between calls. NB: it matches the guest's initial
/// memory (`--initial-memory` in .cargo/config.toml), so resetting a slot is a memset instead of
/// `madvise` plus page faults (../shared/notes/wasm-host.md §4). Measured with `make bench`:
/// 256 KiB gave 16.3 µs p50 per call, 128 KiB 13.5 µs (the memset is most of the difference).
const KEEP_RESIDENT: usize = 128 << 10;

/// Wasm page size.
const PAGE: usize = 64 << 10;

/// Cranelift's x86-64 features above x86-64-v3 (AVX2, BMI1/2, FMA, LZCNT), turned off even where
/// the host has them, so that code compiled on one machine of level v3 or above is the same code,
/// under the same [`wasmtime::Engine::precompile_compatibility_hash`], on every other: a guest
/// precompiled into the image (`app-operator guest precompile`) loads on any such node instead
/// of being compiled at start. A host below v3 infers fewer features, a different hash, and
/// compiles its guests as before. The guests' code hardly uses these (wasm has no 512-bit SIMD).
#[cfg(target_arch = "x86_64")]
const ABOVE_PORTABLE_ISA: [&str; 7] = [
    "has_avx512bitalg",
    "has_avx512dq",
    "has_avx512f",
    "has_avx512vl",
    "has_avx512vbmi",
    "has_avx512vnni",
    "has_avx_vnni",
];

/// Builds the engine for `config`, with a pool of `instances` component instances (the
/// runtime's semaphore lets no more exist at once).
pub(super) fn build(config: &Config, instances: usize) -> Result<Engine, Error> {
    let mut wasm = settings(config, instances);
    portable_isa(&mut wasm);
    Engine::new(&wasm).map_err(|e| Error::Engine(e.into()))
}

/// Every setting of [`build`]'s but the CPU features.
fn settings(config: &Config, instances: usize) -> wasmtime::Config {
    let instances = u32::try_from(instances).unwrap_or(u32::MAX / 8);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        // NB: a wasm32-wasip2 component that imports a host function has 3 core modules (the
        // module, wit-component's shim and fixups; the default guest, importing none, has 1),
        // one memory and two tables; componentize-py's has 14 core modules (CPython
        // and its libraries, one memory of 12.4 MiB, tables of 5672 and 88 elements) and
        // ComponentizeJS's 4 (9.1 MiB, 7689 elements). With 8 per instance, a third Python call
        // at once found the pool exhausted.
        .total_core_instances(instances * 16)
        .total_memories(instances * 2)
        .total_tables(instances * 4)
        // The store limiter enforces `memory_limit` over all of an instance's memories and tables
        // with a readable trap; a pool slot only needs to be at least as large. NB: slots are
        // address space; only the pages a guest touches are resident, and those past
        // KEEP_RESIDENT are returned to the kernel when the instance ends.
        .max_memory_size(config.memory_limit.div_ceil(PAGE).max(1) * PAGE)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(16 << 10);

    let mut wasm = wasmtime::Config::new();
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        // Deadlines: cheaper than fuel for guest code (+20% vs +25%) and for compile time.
        .epoch_interruption(true)
        // Fuel changes the compiled code, so it is only on when a budget is configured.
        .consume_fuel(config.fuel.is_some());
    wasm
}

/// The engine's [`wasmtime::Engine::precompile_compatibility_hash`] as a number: equal for two
/// engines exactly when an artifact of one loads into the other. NB: `DefaultHasher` is stable
/// within a build; another build may give another number, which only costs a compile.
pub(super) fn compatibility(engine: &Engine) -> u64 {
    let mut h = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
}

/// Leaves out the host's CPU features in [`ABOVE_PORTABLE_ISA`] (Cranelift infers the host's,
/// then applies these settings over them).
#[allow(unsafe_code)]
fn portable_isa(wasm: &mut wasmtime::Config) {
    #[cfg(target_arch = "x86_64")]
    for flag in ABOVE_PORTABLE_ISA {
        // SAFETY: turning a CPU feature off only keeps Cranelift from emitting its instructions;
        // the names are Cranelift's x86-64 settings (an unknown name fails `Engine::new`).
        unsafe {
            wasm.cranelift_flag_set(flag, "false");
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = wasm;
}

/// Advances the engine's epoch every [`EPOCH_TICK`] while at least one guest call runs; idle, its
/// thread sleeps without waking. It ends when the ticker or the engine is dropped.
///
/// NB: a thread that ticked always, idle or not, was ~3% of the operator's CPU samples at 1000
/// AppServices (100 wake-ups a second, `clock_nanosleep`). A call's deadline counts ticks from
/// when it starts, so pausing between calls changes no deadline.
pub(super) struct Ticker {
    shared: Arc<TickerShared>,
}

struct TickerShared {
    /// Calls running now; the thread ticks while it is positive.
    calls: AtomicUsize,
    /// Set when the ticker is dropped.
    stopped: AtomicBool,
    /// Epoch increments so far (tests read it; the engine does not expose its epoch).
    ticks: AtomicU64,
    /// The ticking thread, to unpark.
    thread: OnceLock<Thread>,
}

/// Keeps the epoch advancing while it lives: hold one for the length of a guest call.
pub(super) struct Running<'a> {
    shared: &'a TickerShared,
}

impl Ticker {
    /// Starts the (parked) ticking thread for `engine`.
    pub(super) fn start(engine: &Engine) -> Result<Self, Error> {
        let shared = Arc::new(TickerShared {
            calls: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            thread: OnceLock::new(),
        });
        let weak = engine.weak();
        let state = shared.clone();
        let handle = thread::Builder::new()
            .name("guest-epoch".into())
            .spawn(move || state.run(&weak))
            .map_err(|e| Error::Engine(e.into()))?;
        // NB: `set` cannot fail: only this function sets it. Until it is set, a call's unpark is
        // skipped, but the thread checks `calls` before it parks, so no call waits on it.
        let _ = shared.thread.set(handle.thread().clone());
        Ok(Self { shared })
    }

    /// Marks a guest call as running until the guard is dropped.
    pub(super) fn running(&self) -> Running<'_> {
        if self.shared.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.shared.wake();
        }
        Running {
            shared: &self.shared,
        }
    }

    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::SeqCst)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.wake();
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.shared.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

impl TickerShared {
    fn wake(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    /// The thread's loop: park while no call runs, else tick.
    fn run(&self, engine: &EngineWeak) {
        while !self.stopped.load(Ordering::SeqCst) {
            if self.calls.load(Ordering::SeqCst) == 0 {
                // NB: an unpark between the load and here makes `park` return at once.
                thread::park();
                continue;
            }
            let Some(engine) = engine.upgrade() else {
                return;
            };
            engine.increment_epoch();
            self.ticks.fetch_add(1, Ordering::SeqCst);
            drop(engine);
            thread::sleep(EPOCH_TICK);
        }
    }
}

/// Epoch ticks for `deadline`: at least the deadline, at most one tick more.
pub(super) fn deadline_ticks(deadline: Duration) -> u64 {
    // NB: the deadline counts from a ticker phase we do not know, hence the extra tick.
    let ticks = deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX - 1).max(1) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_ticks_round_up_plus_one() {
        assert_eq!(deadline_ticks(Duration::from_millis(100)), 11);
        assert_eq!(deadline_ticks(Duration::from_millis(101)), 12);
        assert_eq!(deadline_ticks(Duration::ZERO), 2);
    }

    /// Cranelift's names of the x86-64-v3 features ([`host_is_v3`]'s, in its order).
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    const V3: [&str; 12] = [
        "has_cmpxchg16b",
        "has_sse3",
        "has_ssse3",
        "has_sse41",
        "has_sse42",
        "has_popcnt",
        "has_avx",
        "has_avx2",
        "has_fma",
        "has_bmi1",
        "has_bmi2",
        "has_lzcnt",
    ];

    /// On a host of x86-64-v3 or above (this one has AVX-512), the engine is the one built for
    /// exactly x86-64-v3, whatever else the host has: what one such machine precompiles, any
    /// other loads.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    #[allow(unsafe_code)]
    fn a_v3_host_compiles_for_exactly_x86_64_v3() {
        if !host_is_v3() {
            eprintln!("skipped: this host is below x86-64-v3");
            return;
        }
        let ours = build(&Config::default(), 1).expect("the default config builds");

        let env = if cfg!(target_env = "musl") {
            "musl"
        } else {
            "gnu"
        };
        let mut exact = settings(&Config::default(), 1);
        exact
            .target(&format!("x86_64-unknown-linux-{env}"))
            .expect("a known triple");
        for flag in V3 {
            // SAFETY: every one of them is on this host (checked above).
            unsafe {
                exact.cranelift_flag_enable(flag);
            }
        }
        let exact = Engine::new(&exact).expect("the exact engine builds");
        assert_eq!(compatibility(&ours), compatibility(&exact));

        if std::arch::is_x86_feature_detected!("avx512f") {
            // NB: the same settings with all of this host's features make another engine.
            let native = Engine::new(&settings(&Config::default(), 1)).expect("it builds");
            assert_ne!(compatibility(&ours), compatibility(&native));
        }
    }

    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn host_is_v3() -> bool {
        use std::arch::is_x86_feature_detected as has;
        has!("cmpxchg16b")
            && has!("sse3")
            && has!("ssse3")
            && has!("sse4.1")
            && has!("sse4.2")
            && has!("popcnt")
            && has!("avx")
            && has!("avx2")
            && has!("fma")
            && has!("bmi1")
            && has!("bmi2")
            && has!("lzcnt")
    }

    #[test]
    fn the_epoch_advances_only_while_a_call_runs() {
        let engine = build(&Config::default(), 1).expect("the default config builds");
        let ticker = Ticker::start(&engine).expect("the thread starts");
        let settle = EPOCH_TICK * 3;
        thread::sleep(settle * 2);
        assert_eq!(ticker.ticks(), 0, "no tick while idle");

        let running = ticker.running();
        thread::sleep(settle * 2);
        let during = ticker.ticks();
        assert!(during >= 2, "ticks while a call runs: {during}");

        drop(running);
        thread::sleep(settle);
        let after = ticker.ticks();
        thread::sleep(settle * 2);
        assert_eq!(ticker.ticks(), after, "no tick after the call ended");

        let _again = ticker.running();
        thread::sleep(settle * 2);
        assert!(ticker.ticks() > after, "ticks again on the next call");
    }
}
