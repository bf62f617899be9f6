//! Polling until the cluster reaches a state, with a deadline.

use std::future::Future;
use std::time::Duration;

use anyhow::bail;

/// How often [`until`] probes.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Probes every 250 ms until `probe` returns `Ok(Some(value))`, and returns that value.
///
/// An `Err` from the probe ends the wait at once. After `timeout` the wait fails with an error
/// naming `what`, so keep it specific ("2/2 ready replicas of deployment web").
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
