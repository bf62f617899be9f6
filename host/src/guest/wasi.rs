//! The locked-down WASI (preview 2) of guests that import it: what CPython or SpiderMonkey need to
//! start, and nothing that reaches outside the call.
//!
//! - no preopened directories (`wasi:filesystem` sees none), no environment variables, no
//!   arguments, no initial directory; stdin is closed;
//! - sockets: TCP, UDP and name lookup are off (creating a socket fails with `access-denied`);
//! - stdout and stderr become guest log lines (target `guest`, see [`log_stream`]);
//! - clocks and random are **deterministic**, always: the wall clock reads
//!   [`WALL_CLOCK_SECONDS`], the monotonic clock is virtual (it advances [`CLOCK_TICK_NS`] per
//!   read and jumps over any sleep, which returns at once), and random bytes come from a fixed
//!   seed. So a render is a function of its input alone, which the controller relies on (it
//!   compares outputs to skip writes, and the swap's dry run compares two guests' outputs), and
//!   no sleep can hold a host thread past the call's deadline.
//!
//! The context is made on a guest's first WASI call, so a guest that imports WASI but never
//! calls it (a plain Rust std guest) pays nothing per call; the default guest imports none
//! (`guest/src/no_wasi.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasData, Linker, Resource, ResourceTable};
use wasmtime::{Engine, Result};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{Deterministic, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::log_stream::{LogStream, Sink, Stream};

/// What the wall clock always reads: 2000-01-01T00:00:00Z.
pub(super) const WALL_CLOCK_SECONDS: u64 = 946_684_800;

/// How far the virtual monotonic clock advances per read, in nanoseconds (its resolution).
pub(super) const CLOCK_TICK_NS: u64 = 1_000;

/// Most random bytes one call to `wasi:random` may ask for. NB: the buffer is host memory,
/// outside the store's memory limit.
const MAX_RANDOM_BYTES: u64 = 64 << 10;

/// Bytes of the fixed random sequence (it repeats after that).
const RANDOM_CYCLE: usize = 4096;

/// A guest's WASI state, made on its first WASI call.
pub(super) struct Wasi {
    ctx: WasiCtx,
    table: ResourceTable,
    /// The virtual monotonic clock, in nanoseconds.
    monotonic_ns: u64,
    stdout: Arc<Mutex<Sink>>,
    stderr: Arc<Mutex<Sink>>,
}

impl Wasi {
    /// The locked-down context; stdio goes to the guest log under `digest`.
    pub(super) fn new(digest: &Arc<str>) -> Self {
        let stdout = Arc::new(Mutex::new(Sink::new(digest.clone(), Stream::Stdout)));
        let stderr = Arc::new(Mutex::new(Sink::new(digest.clone(), Stream::Stderr)));
        let mut b = WasiCtxBuilder::new();
        // NB: the builder's defaults already close stdin and grant no env, args or preopens;
        // sockets are set off here rather than left to the default address check.
        b.stdout(LogStream(stdout.clone()))
            .stderr(LogStream(stderr.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .wall_clock(FixedWallClock)
            .secure_random(Deterministic::new(random_cycle(b"secure")))
            .insecure_random(Deterministic::new(random_cycle(b"insecure")))
            .insecure_random_seed(u128::from_le_bytes([7; 16]))
            .max_random_size(MAX_RANDOM_BYTES);
        Self {
            ctx: b.build(),
            table: ResourceTable::new(),
            monotonic_ns: 0,
            stdout,
            stderr,
        }
    }

    /// The view wasmtime-wasi's host functions work on.
    pub(super) fn view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }

    /// Ends the call: logs what is left of an unfinished line on each stream, and returns the
    /// last stderr line (a runtime's error report), if any.
    pub(super) fn finish(&self) -> Option<String> {
        lock(&self.stdout).finish();
        let mut stderr = lock(&self.stderr);
        stderr.finish();
        stderr.last_line()
    }

    fn clock(&mut self) -> Clock<'_> {
        Clock {
            now: &mut self.monotonic_ns,
            table: &mut self.table,
        }
    }
}

fn lock(sink: &Mutex<Sink>) -> std::sync::MutexGuard<'_, Sink> {
    // NB: a sink is only appended to; a panic elsewhere cannot leave it torn.
    sink.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The data of a Store whose guest may call WASI: it holds the guest's [`Wasi`] context.
pub(super) trait WasiState: WasiView + 'static {
    /// The guest's WASI context, made on first use.
    fn wasi(&mut self) -> &mut Wasi;
}

/// Whether the component imports any WASI interface, so its linker needs them.
pub(super) fn imported(engine: &Engine, component: &Component) -> bool {
    component
        .component_type()
        .imports(engine)
        .any(|(name, _)| name.starts_with("wasi:"))
}

/// Links every WASI preview 2 interface, synchronous, then replaces the monotonic clock with
/// the virtual one.
pub(super) fn add_to_linker<T: WasiState>(linker: &mut Linker<T>) -> Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    monotonic_clock::add_to_linker::<T, HasClock>(linker, |s| s.wasi().clock())?;
    linker.allow_shadowing(false);
    Ok(())
}

/// What the host grants for an import named `name` (`wasi:<package>/<interface>@<version>`):
/// `(granted, how)`; `None` when it is no WASI interface this module links.
pub(super) fn grant(name: &str) -> Option<(bool, String)> {
    let interface = name.split_once('@').map_or(name, |(i, _)| i);
    let stdio = |stream, level| {
        format!(
            "{stream} -> guest log ({level}), {} KiB/call, lines cut at {} KiB",
            super::log_stream::MAX_BYTES_PER_CALL >> 10,
            super::log_stream::MAX_LINE_BYTES >> 10
        )
    };
    let (granted, how) = match interface {
        "wasi:cli/environment" => (
            true,
            "empty: no variables, no arguments, no initial directory".into(),
        ),
        "wasi:cli/exit" => (true, "exit ends the call as a trap".into()),
        "wasi:cli/stdin" => (false, "closed: reads end at once".into()),
        "wasi:cli/stdout" => (true, stdio("stdout", "info")),
        "wasi:cli/stderr" => (true, stdio("stderr", "warn")),
        i if i.starts_with("wasi:cli/terminal-") => (false, "not a terminal".into()),
        "wasi:clocks/wall-clock" => (true, "fixed at 2000-01-01T00:00:00Z".into()),
        "wasi:clocks/monotonic-clock" => (
            true,
            format!(
                "virtual: {} µs per read, sleeps return at once",
                CLOCK_TICK_NS / 1000
            ),
        ),
        i if i.starts_with("wasi:random/") => (true, "deterministic: a fixed seed".into()),
        i if i.starts_with("wasi:io/") => (true, "streams and polls of the above".into()),
        "wasi:filesystem/preopens" => (false, "no directories".into()),
        "wasi:filesystem/types" => (false, "no directory to open a file in".into()),
        i if i.starts_with("wasi:sockets/") => (
            false,
            "no network: sockets and lookups fail with access-denied".into(),
        ),
        _ => return None,
    };
    Some((granted, how))
}

/// Seeded bytes for a deterministic generator: SHA-256 in counter mode over `label`.
fn random_cycle(label: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RANDOM_CYCLE);
    for i in 0u32.. {
        if out.len() >= RANDOM_CYCLE {
            break;
        }
        let mut h = Sha256::new();
        h.update(b"app-operator guest random ");
        h.update(label);
        h.update(i.to_le_bytes());
        out.extend_from_slice(&h.finalize());
    }
    out
}

/// The wall clock: always [`WALL_CLOCK_SECONDS`].
struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        Duration::from_secs(WALL_CLOCK_SECONDS)
    }
}

/// The virtual monotonic clock of one call.
struct Clock<'a> {
    now: &'a mut u64,
    table: &'a mut ResourceTable,
}

struct HasClock;

impl HasData for HasClock {
    type Data<'a> = Clock<'a>;
}

impl monotonic_clock::Host for Clock<'_> {
    fn now(&mut self) -> Result<u64> {
        *self.now = self.now.saturating_add(CLOCK_TICK_NS);
        Ok(*self.now)
    }

    fn resolution(&mut self) -> Result<u64> {
        Ok(CLOCK_TICK_NS)
    }

    fn subscribe_instant(&mut self, when: u64) -> Result<Resource<DynPollable>> {
        *self.now = (*self.now).max(when);
        let ready = self.table.push(Ready)?;
        subscribe(self.table, ready)
    }

    fn subscribe_duration(&mut self, duration: u64) -> Result<Resource<DynPollable>> {
        *self.now = self.now.saturating_add(duration);
        let ready = self.table.push(Ready)?;
        subscribe(self.table, ready)
    }
}

/// A pollable that is ready at once: a sleep on the virtual clock.
struct Ready;

#[wasmtime_wasi::async_trait]
impl Pollable for Ready {
    async fn ready(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_import_of_the_big_guests_is_described() {
        assert_eq!(
            grant("wasi:cli/stdout@0.2.6"),
            Some((
                true,
                "stdout -> guest log (info), 4 KiB/call, lines cut at 1 KiB".into()
            ))
        );
        assert_eq!(grant("wasi:sockets/tcp@0.2.0").map(|g| g.0), Some(false));
        assert_eq!(
            grant("wasi:filesystem/preopens@0.2.9").map(|g| g.0),
            Some(false)
        );
        assert_eq!(grant("wasi:http/outgoing-handler@0.2.0"), None);
    }

    #[test]
    fn the_random_cycle_is_fixed_and_distinct_per_label() {
        let a = random_cycle(b"secure");
        assert_eq!(a.len(), RANDOM_CYCLE);
        assert_eq!(a, random_cycle(b"secure"));
        assert_ne!(a, random_cycle(b"insecure"));
        assert!(a.iter().any(|b| *b != a[0]), "not a constant");
    }

    #[test]
    fn sleeping_on_the_virtual_clock_only_moves_it() {
        let mut table = ResourceTable::new();
        let mut now = 0;
        let mut clock = Clock {
            now: &mut now,
            table: &mut table,
        };
        use monotonic_clock::Host as _;
        assert_eq!(clock.now().expect("reads"), CLOCK_TICK_NS);
        clock.subscribe_duration(3_600_000_000_000).expect("sleeps");
        assert_eq!(
            clock.now().expect("reads"),
            3_600_000_000_000 + 2 * CLOCK_TICK_NS
        );
        clock.subscribe_instant(10).expect("an instant in the past");
        assert_eq!(
            clock.now().expect("reads"),
            3_600_000_000_000 + 3 * CLOCK_TICK_NS
        );
    }
}
