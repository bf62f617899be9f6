//! The fence: the leader's client sends a write only while this replica surely holds the Lease.
//!
//! # Timing
//!
//! Let `D` be the lease duration, `G` the renew grace and `R` the renew deadline, with
//! `D - G < R < D` ([`super::Config::check`]).
//!
//! - A renewal writes `renewTime = t_r` (the leader's wall clock) and leaves this layer at
//!   `t_0`, a few µs later (ms for the acquisition's second PATCH). When the API server answers
//!   with this replica as the holder, the fence is valid until `t_0 + R` on the monotonic clock,
//!   which keeps running while the process is paused (SIGSTOP), so a resumed process sees at once
//!   that it expired.
//! - The next renewal is due at `t_r + D - G`; a failed one is retried until the fence expires
//!   (`super::hold`). Then every write is refused here, before it is sent, and the controller and
//!   the guest source are stopped.
//! - A standby takes the Lease only once its wall clock passes `t_r + D`
//!   (kube-lease-manager reads `renewTime + leaseDurationSeconds`).
//!
//! So the old leader's last write leaves before `t_0 + R` and the new leader's first one after
//! `t_r + D`: the margin `D - R` (2 s by default) must cover `t_0 - t_r`, the latency of a write
//! sent just before the deadline, and the clock skew between the nodes. The one gap left is a
//! process paused between the check and the send (a few µs); Kubernetes has no fencing token
//! that could close it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Either, Full};
use kube::client::Body;
use tower::{BoxError, Layer, Service};
use tracing::{debug, warn};

/// A write refused because this replica does not surely hold the Lease.
#[derive(Debug, thiserror::Error)]
#[error("refused {method} {path}: this replica does not surely hold the leader Lease")]
pub struct Fenced {
    /// The request's method.
    pub method: Method,
    /// The request's path.
    pub path: String,
}

/// Whether this replica may write, shared by the leader election and the client's layer.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    identity: String,
    renew_deadline: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    armed: bool,
    closed: bool,
    valid_until: Option<Instant>,
}

impl Fence {
    /// A closed fence for `identity`: writes pass only once it is armed, for `renew_deadline`
    /// after each renewal the API server confirms.
    pub fn new(identity: impl Into<String>, renew_deadline: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                identity: identity.into(),
                renew_deadline,
                state: Mutex::default(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // NB: every critical section only assigns plain fields; a panic cannot tear them.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a Lease write, sent at `sent`, that the API server answered with this replica
    /// as the holder.
    pub fn renewed(&self, sent: Instant) {
        let until = sent + self.inner.renew_deadline;
        let mut state = self.state();
        if !state.closed && state.valid_until.is_none_or(|v| v < until) {
            state.valid_until = Some(until);
        }
    }

    /// Lets writes through while the Lease is renewed: called once the replica leads.
    pub fn arm(&self) {
        self.state().armed = true;
    }

    /// Refuses every write from now on, whatever renewals follow.
    pub fn close(&self) {
        self.state().closed = true;
    }

    /// Whether a write may be sent at `now`.
    pub fn is_open(&self, now: Instant) -> bool {
        let state = self.state();
        state.armed && !state.closed && state.valid_until.is_some_and(|v| now < v)
    }

    /// Completes once the fence is closed or its last renewal is older than the renew deadline.
    pub async fn expired(&self) {
        loop {
            let until = {
                let state = self.state();
                match (state.closed, state.valid_until) {
                    (true, _) | (false, None) => return,
                    (false, Some(until)) => until,
                }
            };
            if Instant::now() >= until {
                return;
            }
            tokio::time::sleep_until(until.into()).await;
        }
    }

    /// The client layer that enforces this fence.
    pub fn layer(&self) -> FenceLayer {
        FenceLayer {
            fence: self.clone(),
        }
    }
}

/// Refuses writes (any method but GET, HEAD, OPTIONS) while the fence is not open, and renews
/// it on each Lease write the API server answers with this replica as the holder. Lease writes
/// themselves always pass: they are how the fence is renewed.
#[derive(Clone, Debug)]
pub struct FenceLayer {
    fence: Fence,
}

impl<S> Layer<S> for FenceLayer {
    type Service = FenceService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FenceService {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// The service of [`FenceLayer`].
#[derive(Clone, Debug)]
pub struct FenceService<S> {
    inner: S,
    fence: Fence,
}

type Reply<B> = Response<Either<B, Full<Bytes>>>;

impl<S, B> Service<Request<Body>> for FenceService<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Reply<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let sent = Instant::now();
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let write = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
        let lease = path.contains("/apis/coordination.k8s.io/");
        if write && !lease {
            if !self.fence.is_open(sent) {
                warn!(%method, %path, "write refused: the leader Lease is not surely held");
                return Box::pin(std::future::ready(Err(Fenced { method, path }.into())));
            }
            debug!(%method, %path, "write sent under the leader Lease");
        }
        let response = self.inner.call(request);
        let fence = self.fence.clone();
        Box::pin(async move {
            let response = response.await.map_err(Into::into)?;
            if !(write && lease && response.status().is_success()) {
                return Ok(response.map(Either::Left));
            }
            let (parts, body) = response.into_parts();
            let bytes = body.collect().await.map_err(Into::into)?.to_bytes();
            if holder(&bytes).as_deref() == Some(fence.inner.identity.as_str()) {
                fence.renewed(sent);
            }
            Ok(Response::from_parts(parts, Either::Right(Full::new(bytes))))
        })
    }
}

/// `spec.holderIdentity` of a Lease in JSON, if any.
fn holder(lease: &[u8]) -> Option<String> {
    let lease: serde_json::Value = serde_json::from_slice(lease).ok()?;
    Some(lease["spec"]["holderIdentity"].as_str()?.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Duration = Duration::from_secs(13);

    #[test]
    fn writes_pass_only_when_armed_and_within_the_renew_deadline() {
        let fence = Fence::new("a", R);
        let t0 = Instant::now();
        fence.renewed(t0);
        assert!(!fence.is_open(t0), "not armed: a standby never writes");
        fence.arm();
        assert!(fence.is_open(t0));
        assert!(fence.is_open(t0 + R - Duration::from_millis(1)));
        assert!(!fence.is_open(t0 + R), "expired at the renew deadline");
        // A renewal sent later extends it; an older answer arriving late does not shorten it.
        fence.renewed(t0 + Duration::from_secs(10));
        fence.renewed(t0 + Duration::from_secs(5));
        assert!(fence.is_open(t0 + R + Duration::from_secs(9)));
        assert!(!fence.is_open(t0 + R + Duration::from_secs(10)));
    }

    #[test]
    fn a_closed_fence_stays_closed() {
        let fence = Fence::new("a", R);
        let t0 = Instant::now();
        fence.arm();
        fence.renewed(t0);
        fence.close();
        assert!(!fence.is_open(t0));
        fence.renewed(t0 + Duration::from_secs(1));
        assert!(!fence.is_open(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn only_a_lease_held_by_this_identity_renews() {
        let ours = br#"{"spec":{"holderIdentity":"a","renewTime":"2026-01-01T00:00:00.000000Z"}}"#;
        assert_eq!(holder(ours).as_deref(), Some("a"));
        assert_eq!(
            holder(br#"{"spec":{"holderIdentity":"b"}}"#).as_deref(),
            Some("b")
        );
        assert_eq!(holder(br#"{"spec":{}}"#), None);
        assert_eq!(holder(b"not json"), None);
    }

    #[tokio::test]
    async fn expired_completes_once_the_deadline_passes_or_on_close() {
        let fence = Fence::new("a", Duration::from_millis(50));
        fence.arm();
        fence.renewed(Instant::now());
        assert!(fence.is_open(Instant::now()));
        // NB: the timeout only keeps a broken fence from hanging the test.
        tokio::time::timeout(Duration::from_secs(30), fence.expired())
            .await
            .expect("the fence expires");
        assert!(!fence.is_open(Instant::now()));

        let closed = Fence::new("a", Duration::from_secs(3600));
        closed.arm();
        closed.renewed(Instant::now());
        closed.close();
        tokio::time::timeout(Duration::from_secs(30), closed.expired())
            .await
            .expect("a closed fence is expired");
    }

    async fn send(fence: &Fence, method: Method, path: &str, reply: &'static str) -> bool {
        use tower::ServiceExt;
        let inner = tower::service_fn(move |_: Request<Body>| async move {
            Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(reply))))
        });
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .expect("a valid request");
        fence.layer().layer(inner).oneshot(request).await.is_ok()
    }

    #[tokio::test]
    async fn the_layer_refuses_writes_until_a_renewal_names_this_replica() {
        const APPLY: &str = "/apis/apps/v1/namespaces/web/deployments/web";
        const LEASE: &str =
            "/apis/coordination.k8s.io/v1/namespaces/ops/leases/app-operator-leader";
        let fence = Fence::new("a", R);
        fence.arm();
        assert!(
            send(&fence, Method::GET, APPLY, "{}").await,
            "reads always pass"
        );
        assert!(
            !send(&fence, Method::PATCH, APPLY, "{}").await,
            "no renewal yet"
        );
        let theirs = r#"{"spec":{"holderIdentity":"b"}}"#;
        assert!(
            send(&fence, Method::PATCH, LEASE, theirs).await,
            "Lease writes pass"
        );
        assert!(
            !send(&fence, Method::PATCH, APPLY, "{}").await,
            "another holder renews nothing"
        );
        let ours = r#"{"spec":{"holderIdentity":"a"}}"#;
        assert!(send(&fence, Method::PATCH, LEASE, ours).await);
        assert!(send(&fence, Method::PATCH, APPLY, "{}").await, "renewed");
        assert!(send(&fence, Method::DELETE, APPLY, "{}").await);
        fence.close();
        assert!(!send(&fence, Method::POST, APPLY, "{}").await, "closed");
    }
}
