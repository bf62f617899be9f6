//! The watches' retry delays: short and bounded, so that a watch is back within a couple of
//! seconds of the API server's return.
//!
//! kube's default (client-go's: 0.8 s doubling up to 30 s) made a 15 s API server outage cost
//! about 40 s of recovery, since the next try after a long outage was up to 25.6 s away. Here a
//! watch retries after 0.2 s, doubling up to [`MAX`] (2 s), each delay cut by a random 0–50 %
//! so that the watches of many replicas do not retry in step, and starts again from 0.2 s after
//! any success (kube's `StreamBackoff` resets it on every event that is not an error). Four
//! watches retrying every 2 s are a handful of requests per second during an outage, which the
//! API server's priority and fairness sheds cheaply if it is overloaded rather than down.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use kube::runtime::utils::Backoff;

/// The first retry delay.
pub const FIRST: Duration = Duration::from_millis(200);
/// The longest retry delay.
pub const MAX: Duration = Duration::from_secs(2);

/// Retry delays of one watch: [`FIRST`] doubling up to [`MAX`], each with up to 50 % jitter
/// taken off.
#[derive(Debug)]
pub struct WatchBackoff {
    next: Duration,
    jitter: std::collections::hash_map::RandomState,
    tries: u64,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self {
            next: FIRST,
            jitter: Default::default(),
            tries: 0,
        }
    }
}

impl WatchBackoff {
    /// A fraction in `[0.5, 1.0)`, different at each try.
    fn jitter(&mut self) -> f64 {
        self.tries += 1;
        let mut hasher = self.jitter.build_hasher();
        hasher.write_u64(self.tries);
        0.5 + (hasher.finish() % 1000) as f64 / 2000.0
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next.mul_f64(self.jitter());
        self.next = (self.next * 2).min(MAX);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_bound_with_jitter_and_reset() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<Duration> = backoff.by_ref().take(8).collect();
        let bounds = [200, 400, 800, 1600, 2000, 2000, 2000, 2000];
        for (delay, bound) in delays.iter().zip(bounds) {
            let bound = Duration::from_millis(bound);
            assert!(*delay <= bound && *delay >= bound / 2, "{delays:?}");
        }
        assert!(
            delays[4..].windows(2).any(|w| w[0] != w[1]),
            "jittered: {delays:?}"
        );
        backoff.reset();
        assert!(backoff.next().unwrap() <= FIRST);
    }
}
