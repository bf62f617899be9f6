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
//! the thread pauses only when it has nothing to run.

use std::time::Duration;

use tokio::runtime::{Builder, Runtime};

/// How long the runtime's thread waits, when it has nothing left to run, before it sleeps
/// until an answer, a watch event or a timer wakes it.
pub const DEFAULT_WAKE_PAUSE: Duration = Duration::from_millis(10);

/// A runtime of one thread, with every driver, that waits `pause` before each sleep (none:
/// `Duration::ZERO`).
pub fn build(pause: Duration) -> std::io::Result<Runtime> {
    let mut builder = Builder::new_current_thread();
    builder.enable_all();
    if !pause.is_zero() {
        // NB: called only when no task is runnable, right before the thread waits in epoll;
        // whatever arrives during the pause is ready when it does, and it does not sleep.
        builder.on_thread_park(move || std::thread::sleep(pause));
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A timer that wakes the sleeping thread fires no earlier than the pause; tasks handing
    /// work to each other never wait for it (the thread pauses only with nothing to run).
    #[test]
    fn the_thread_pauses_before_it_sleeps_never_while_work_is_runnable() {
        let pause = Duration::from_millis(100);
        let runtime = build(pause).expect("runtime");
        let (slept, handed) = runtime.block_on(async {
            let start = Instant::now();
            tokio::time::sleep(Duration::from_millis(1)).await;
            let slept = start.elapsed();

            // NB: 1000 hand-offs between two tasks; pausing at each would take 100 s.
            let (to_echo, mut echo_rx) = tokio::sync::mpsc::channel::<u32>(1);
            let (to_main, mut main_rx) = tokio::sync::mpsc::channel::<u32>(1);
            let echo = tokio::spawn(async move {
                while let Some(n) = echo_rx.recv().await {
                    to_main.send(n).await.expect("main receives");
                }
            });
            let start = Instant::now();
            for n in 0..1000 {
                to_echo.send(n).await.expect("echo receives");
                assert_eq!(main_rx.recv().await, Some(n));
            }
            let handed = start.elapsed();
            drop(to_echo);
            echo.await.expect("echo ends");
            (slept, handed)
        });
        assert!(slept >= pause, "a 1 ms timer fired after {slept:?}");
        assert!(handed < pause * 100, "1000 hand-offs took {handed:?}");

        let unpaused = build(Duration::ZERO).expect("runtime");
        let slept = unpaused.block_on(async {
            let start = Instant::now();
            tokio::time::sleep(Duration::from_millis(1)).await;
            start.elapsed()
        });
        assert!(
            slept < pause,
            "without a pause a 1 ms timer fired after {slept:?}"
        );
    }
}
