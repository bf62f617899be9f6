//! The host state of one guest call's Store: the memory limiter over every memory and table,
//! the log budget of `host.log`, and (made on first use) the guest's locked-down WASI context.

use std::sync::Arc;

use tracing::{Level, event, warn};
use wasmtime::ResourceLimiter;
use wasmtime_wasi::{WasiCtxView, WasiView};

use super::TABLE_ELEMENT_BYTES;
use super::bindings::{host, types, v0_2};
use super::wasi::{Wasi, WasiState};
use crate::text::truncate_then_mark;

/// Log lines kept per call; the rest are dropped with one warning.
const MAX_LOG_LINES: u32 = 32;
/// Bytes kept of one guest log line.
const MAX_LOG_BYTES: usize = 1024;
/// Table elements a guest may grow to.
const MAX_TABLE_ELEMENTS: usize = 10_000;

/// The per-call host state: the limiter, the log budget and, once the guest calls WASI, its
/// locked-down WASI context.
pub(super) struct State {
    digest: Arc<str>,
    memory_limit: usize,
    /// Bytes of every memory and table of this Store's instance, as granted so far.
    memory_used: usize,
    /// Whether a growth was refused for the limit: the call failed for memory.
    pub(super) memory_exceeded: bool,
    log_lines: u32,
    /// The guest's last error message (logged at error level, or its last stderr line).
    pub(super) last_error: Option<String>,
    /// NB: made on the first WASI call (`State::wasi`), so guests that never call WASI pay
    /// nothing for it.
    wasi: Option<Box<Wasi>>,
}

impl State {
    /// The state of a fresh Store for guest `digest`, whose instance may hold `memory_limit`
    /// bytes of memories and tables.
    pub(super) fn new(digest: Arc<str>, memory_limit: usize) -> Self {
        Self {
            digest,
            memory_limit,
            memory_used: 0,
            memory_exceeded: false,
            log_lines: 0,
            last_error: None,
            wasi: None,
        }
    }

    /// Logs the guest's unfinished stdio lines; its last stderr line (a runtime's report of an
    /// uncaught exception) stands for the error message when it logged none through `host.log`.
    pub(super) fn finish_wasi(&mut self) {
        if let Some(line) = self.wasi.as_ref().and_then(|w| w.finish())
            && self.last_error.is_none()
        {
            self.last_error = Some(line);
        }
    }

    /// Grants a growth of one memory or table from `current` to `desired` bytes if the instance's
    /// total stays within the limit. NB: wasmtime asks with `current` 0 when it creates a memory
    /// or table, so the total covers the initial sizes as well.
    fn grow(&mut self, what: &str, current: usize, desired: usize) -> wasmtime::Result<bool> {
        let total = self
            .memory_used
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.memory_limit {
            // NB: an error (not `Ok(false)`) traps at once with this message, instead of letting
            // the guest's allocator abort with a bare `unreachable`.
            self.memory_exceeded = true;
            wasmtime::bail!(
                "guest {what} would bring the instance to {total} bytes, over the {} byte limit",
                self.memory_limit
            );
        }
        // NB: a growth that then fails stays counted: the total only errs on the safe side.
        self.memory_used = total;
        Ok(true)
    }
}

impl ResourceLimiter for State {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow("memory", current, desired)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.grow(
            "table",
            current.saturating_mul(TABLE_ELEMENT_BYTES),
            desired.saturating_mul(TABLE_ELEMENT_BYTES),
        )
    }
}

impl WasiState for State {
    fn wasi(&mut self) -> &mut Wasi {
        let digest = &self.digest;
        self.wasi.get_or_insert_with(|| Box::new(Wasi::new(digest)))
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi().view()
    }
}

impl types::Host for State {}

impl v0_2::types::Host for State {}

impl v0_2::host::Host for State {
    fn log(&mut self, level: v0_2::types::LogLevel, message: String) {
        host::Host::log(self, level.into(), message);
    }
}

impl host::Host for State {
    fn log(&mut self, level: types::LogLevel, message: String) {
        let message = truncate_then_mark(message, MAX_LOG_BYTES);
        if matches!(level, types::LogLevel::Error) {
            self.last_error = Some(message.clone());
        }
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                warn!(target: "guest", digest = %self.digest, "guest log budget of {MAX_LOG_LINES} lines per call exhausted; dropping the rest");
            }
            return;
        }
        let digest = &*self.digest;
        match level {
            types::LogLevel::Trace => event!(target: "guest", Level::TRACE, digest, "{message}"),
            types::LogLevel::Debug => event!(target: "guest", Level::DEBUG, digest, "{message}"),
            types::LogLevel::Info => event!(target: "guest", Level::INFO, digest, "{message}"),
            types::LogLevel::Warn => event!(target: "guest", Level::WARN, digest, "{message}"),
            types::LogLevel::Error => event!(target: "guest", Level::ERROR, digest, "{message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(memory_limit: usize) -> State {
        State::new("sha256:test".into(), memory_limit)
    }

    #[test]
    fn the_limit_covers_every_memory_and_table_together() {
        let mut s = state(1000);
        assert!(s.memory_growing(0, 400, None).expect("fits"));
        assert!(
            s.memory_growing(0, 400, None)
                .expect("a second memory fits")
        );
        // 10 elements of 16 bytes: 960 in all.
        assert!(s.table_growing(0, 10, None).expect("the table fits"));
        assert_eq!(s.memory_used, 960);
        let err = s
            .memory_growing(400, 450, None)
            .expect_err("one memory alone would fit, the instance does not");
        assert!(err.to_string().contains("1010 bytes"), "{err}");
        assert!(s.memory_exceeded);
    }

    #[test]
    fn growth_counts_only_the_difference() {
        let mut s = state(1000);
        assert!(s.memory_growing(0, 600, None).expect("fits"));
        assert!(
            s.memory_growing(600, 1000, None)
                .expect("grows to the limit")
        );
        assert_eq!(s.memory_used, 1000);
        assert!(!s.memory_exceeded);
    }

    #[test]
    fn a_table_past_its_element_cap_is_refused_without_a_trap() {
        let mut s = state(usize::MAX);
        assert!(
            !s.table_growing(0, MAX_TABLE_ELEMENTS + 1, None)
                .expect("no trap")
        );
        assert_eq!(s.memory_used, 0);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate_then_mark("short".into(), 10), "short");
        assert_eq!(truncate_then_mark("abcdef".into(), 3), "abc…");
        assert_eq!(truncate_then_mark("ééé".into(), 3), "é…");
    }
}
