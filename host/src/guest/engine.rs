//! The wasmtime engine: every non-default setting in one place, and the epoch ticker.

use std::thread;
use std::time::Duration;

use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

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

/// Builds the engine for `config`, with a pool of `instances` component instances (the
/// runtime's semaphore lets no more exist at once).
pub(super) fn build(config: &Config, instances: usize) -> Result<Engine, Error> {
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
    Engine::new(&wasm).map_err(|e| Error::Engine(e.into()))
}

/// Starts the thread that advances the engine's epoch every [`EPOCH_TICK`]; it ends when the
/// engine is dropped.
pub(super) fn start_ticker(engine: &Engine) -> Result<(), Error> {
    let weak = engine.weak();
    thread::Builder::new()
        .name("guest-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                thread::sleep(EPOCH_TICK);
            }
        })
        .map(drop)
        .map_err(|e| Error::Engine(e.into()))
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
}
