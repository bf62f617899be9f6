//! The `run` flags that shape the guest engine, and so the code compiled for it: shared with
//! `guest precompile`, whose artifacts load only into an engine of the same settings.

use crate::guest;

/// Memory and fuel of the guest engine.
#[derive(Clone, Debug, clap::Args)]
pub struct EngineArgs {
    /// Cap on one guest instance's memory (every linear memory and table), in MiB.
    #[arg(long, env = "APP_OPERATOR_GUEST_MEMORY_MIB", default_value_t = guest::DEFAULT_MEMORY_LIMIT >> 20)]
    pub guest_memory_mib: usize,
    /// Cap on the memory all guest instances hold at once, in MiB: budget / --guest-memory-mib
    /// guest calls run at once, whoever makes them (reconciles, a swap's dry run).
    #[arg(long, env = "APP_OPERATOR_GUEST_MEMORY_BUDGET_MIB", default_value_t = guest::DEFAULT_MEMORY_BUDGET >> 20)]
    pub guest_memory_budget_mib: usize,
    /// Fuel budget of one guest call. Default: no fuel limit.
    #[arg(long, env = "APP_OPERATOR_GUEST_FUEL")]
    pub guest_fuel: Option<u64>,
}

impl EngineArgs {
    /// Sets `config`'s memory limit, budget and fuel from the flags.
    pub fn apply(&self, config: &mut guest::Config) {
        config.memory_limit = self.guest_memory_mib.saturating_mul(1 << 20);
        config.memory_budget = self.guest_memory_budget_mib.saturating_mul(1 << 20);
        config.fuel = self.guest_fuel.or(config.fuel);
    }
}
