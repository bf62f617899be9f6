//! The operator's runtime pauses before its thread sleeps, never while work is runnable or a
//! guest call is awaited (`app_operator::runtime`).
//!
//! NB: a test binary of its own: the count of awaited work is the process's, and the library's
//! unit tests render guests concurrently.

use std::time::{Duration, Instant};

use app_operator::runtime;

/// A timer that wakes the sleeping thread fires no earlier than the pause; tasks handing
/// work to each other never wait for it (the thread pauses only with nothing to run).
#[test]
fn the_thread_pauses_before_it_sleeps_never_while_work_is_runnable() {
    let pause = Duration::from_millis(100);
    let paused = runtime::build(pause).expect("runtime");
    let (slept, handed) = paused.block_on(async {
        let slept = one_ms_timer().await;

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

    // NB: while work off the thread is awaited, the thread sleeps at once.
    let awaited = paused.block_on(async {
        let _awaiting = runtime::awaiting();
        one_ms_timer().await
    });
    assert!(
        awaited < pause,
        "awaiting, a 1 ms timer fired after {awaited:?}"
    );

    let unpaused = runtime::build(Duration::ZERO).expect("runtime");
    let slept = unpaused.block_on(one_ms_timer());
    assert!(
        slept < pause,
        "without a pause a 1 ms timer fired after {slept:?}"
    );
}

/// How long a 1 ms timer took to fire.
async fn one_ms_timer() -> Duration {
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(1)).await;
    start.elapsed()
}
