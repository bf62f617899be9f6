//! The async runtime the binaries run on: one thread, which waits a moment before it sleeps, so
//! that the answers and watch events arriving meanwhile wake it once rather than once each.
//!
//! Why one thread: the controller's future (watches, queue, reconciles) and hyper's HTTP/2
//! connection hand every request and every watch event to each other; on one thread that costs
//! no futex wake and no context switch (docs/development.md, "One thread"). Guest calls still
//! run on the blocking pool, so a slow guest never holds the thread.
//!
//! Why the wait: in a burst the operator spends most of its time waiting on the API server, and
//! it woke for nearly every answer and every watch event on its own: 12,000 of the 22,000
//! `epoll_pwait` calls of a 1000-AppService run slept and were woken by one, and the kernel's
//! switch into the thread had about a sixth of the CPU profile. Waiting [`DEFAULT_WAKE_PAUSE`]
//! before sleeping lets what arrives meanwhile be handled in one wake-up: about 0.8x the CPU for
//! the same burst, with every child applied as soon (docs/development.md, "Fewer wake-ups").
//! The price is latency: what arrives during a pause waits for its end (what arrives while the
//! thread sleeps wakes it at once), and timers fire up to a pause late. Nothing runnable waits:
//! the thread pauses only when it has nothing to run, and not while it awaits a guest call on the
//! blocking pool ([`blocking`]), whose result is due in well under a pause: a swap's dry run
//! renders every AppService, four at a time, and paused after each four it took 2.9 s for 1000
//! instead of 0.4 s.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};

/// How long the runtime's thread waits, when it has nothing left to run, before it sleeps
/// until an answer, a watch event or a timer wakes it.
pub const DEFAULT_WAKE_PAUSE: Duration = Duration::from_millis(10);

/// How many [`Awaiting`] live: while any does, the thread does not pause.
static AWAITED: AtomicUsize = AtomicUsize::new(0);

/// Work off the runtime's thread whose result the thread awaits; while it lives, the thread
/// does not pause before it sleeps. Hold it from before the work is handed off until its
/// result is back.
#[must_use = "the thread pauses again once this is dropped"]
#[derive(Debug)]
pub struct Awaiting(());

/// Marks work off the thread as awaited until the returned guard is dropped ([`Awaiting`]).
pub fn awaiting() -> Awaiting {
    AWAITED.fetch_add(1, Ordering::Relaxed);
    Awaiting(())
}

impl Drop for Awaiting {
    fn drop(&mut self) {
        AWAITED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `work` on the blocking pool and awaits its result, the thread not pausing meanwhile
/// ([`Awaiting`]): for work whose result is due in well under a pause (a guest call, a compile).
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let _awaiting = awaiting();
    tokio::task::spawn_blocking(work).await
}

/// A runtime of one thread, with every driver, that waits `pause` before each sleep (none:
/// `Duration::ZERO`).
pub fn build(pause: Duration) -> std::io::Result<Runtime> {
    let mut builder = Builder::new_current_thread();
    builder.enable_all();
    if !pause.is_zero() {
        // NB: called only when no task is runnable, right before the thread waits in epoll;
        // whatever arrives during the pause is ready when it does, and it does not sleep.
        builder.on_thread_park(move || {
            if AWAITED.load(Ordering::Relaxed) == 0 {
                std::thread::sleep(pause);
            }
        });
    }
    builder.build()
}
