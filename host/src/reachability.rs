//! Whether the API server answers, judged from the outcome of every request the client sends,
//! and the client layer that judges it (and bounds how long a request may hang).
//!
//! A request that gets no HTTP answer (connection refused or reset, TLS failure, time-out) or a
//! `502`/`503`/`504` marks the API server unreachable; any other answer, a watch's `200`
//! included, marks it reachable again. The state is shown by `/readyz`, the
//! `app_operator_api_reachable` gauge and a log line at each change, and the controller retries
//! the reconciles that failed meanwhile as soon as it is reachable again.
//!
//! NB: a watch request is never timed out here: it is meant to stay open, and kube's watcher
//! bounds its idle time itself (the server-side timeout plus a margin).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use tokio::sync::watch;
use tower::{BoxError, Layer, Service};
use tracing::{info, warn};

use crate::metrics::Metrics;

/// Default longest time a request other than a watch may take.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A request that got no answer within the request time-out.
#[derive(Debug, thiserror::Error)]
#[error("no answer from the API server within {0:?}")]
pub struct TimedOut(pub Duration);

/// Whether the API server answered the last request. Cheap to clone: clones share the state.
#[derive(Clone, Debug)]
pub struct Reachability {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    request_timeout: Duration,
    metrics: Option<Metrics>,
    /// Since when the API server has not answered; `None` while it answers.
    unreachable_since: watch::Sender<Option<Instant>>,
}

/// What one request came to, as far as reachability goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Answered,
    Failed(&'static str),
}

impl Outcome {
    fn of_status(status: StatusCode) -> Self {
        match status {
            StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => Self::Failed("unavailable"),
            _ => Self::Answered,
        }
    }
}

impl Default for Reachability {
    fn default() -> Self {
        Self::new(DEFAULT_REQUEST_TIMEOUT, None)
    }
}

impl Reachability {
    /// Reachable until a request says otherwise; requests other than watches time out after
    /// `request_timeout`; changes are shown in `metrics` when given.
    pub fn new(request_timeout: Duration, metrics: Option<Metrics>) -> Self {
        if let Some(metrics) = &metrics {
            metrics.api_reachable(true);
        }
        Self {
            inner: Arc::new(Inner {
                request_timeout,
                metrics,
                unreachable_since: watch::Sender::new(None),
            }),
        }
    }

    /// Whether the last request that finished got an answer.
    pub fn is_reachable(&self) -> bool {
        self.unreachable_for().is_none()
    }

    /// How long the API server has been unreachable, if it is.
    pub fn unreachable_for(&self) -> Option<Duration> {
        self.inner
            .unreachable_since
            .borrow()
            .map(|since| since.elapsed())
    }

    /// A receiver of since when the API server has not answered (`None` while it answers),
    /// which changes at each transition.
    pub fn subscribe(&self) -> watch::Receiver<Option<Instant>> {
        self.inner.unreachable_since.subscribe()
    }

    /// The client layer that feeds this state.
    pub fn layer(&self) -> ReachabilityLayer {
        ReachabilityLayer { api: self.clone() }
    }

    /// Records a failed request, as a test would see one.
    #[cfg(test)]
    pub(crate) fn testing_fail(&self) {
        self.record(Outcome::Failed("transport"), None);
    }

    fn record(&self, outcome: Outcome, error: Option<&dyn std::fmt::Display>) {
        let now = Instant::now();
        let changed =
            self.inner
                .unreachable_since
                .send_if_modified(|since| match (outcome, *since) {
                    (Outcome::Answered, Some(from)) => {
                        *since = None;
                        info!(
                            after_ms = now.duration_since(from).as_millis() as u64,
                            "API server reachable again"
                        );
                        true
                    }
                    (Outcome::Failed(kind), None) => {
                        *since = Some(now);
                        let error = error.map(ToString::to_string).unwrap_or_default();
                        warn!(kind, %error, "API server unreachable");
                        true
                    }
                    _ => false,
                });
        let Some(metrics) = &self.inner.metrics else {
            return;
        };
        if let Outcome::Failed(kind) = outcome {
            metrics.api_failure(kind);
        }
        if changed {
            metrics.api_reachable(outcome == Outcome::Answered);
        }
    }
}

/// Records each request's outcome in a [`Reachability`] and times out requests other than
/// watches.
#[derive(Clone, Debug)]
pub struct ReachabilityLayer {
    api: Reachability,
}

impl<S> Layer<S> for ReachabilityLayer {
    type Service = ReachabilityService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReachabilityService {
            inner,
            api: self.api.clone(),
        }
    }
}

/// The service of [`ReachabilityLayer`].
#[derive(Clone, Debug)]
pub struct ReachabilityService<S> {
    inner: S,
    api: Reachability,
}

/// Whether `request` opens a watch (`?watch=true`, as kube sends it, or `watch=1`).
fn is_watch<B>(request: &Request<B>) -> bool {
    request.uri().query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

impl<S, B> Service<Request<Body>> for ReachabilityService<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let timeout = (!is_watch(&request)).then_some(self.api.inner.request_timeout);
        let response = self.inner.call(request);
        let api = self.api.clone();
        Box::pin(async move {
            let result = match timeout {
                Some(limit) => match tokio::time::timeout(limit, response).await {
                    Ok(result) => result.map_err(Into::into),
                    Err(_) => Err(TimedOut(limit).into()),
                },
                None => response.await.map_err(Into::into),
            };
            match &result {
                Ok(response) => api.record(Outcome::of_status(response.status()), None),
                Err(error) => {
                    let kind = if error.is::<TimedOut>() {
                        "timeout"
                    } else {
                        "transport"
                    };
                    api.record(Outcome::Failed(kind), Some(error));
                }
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::convert::Infallible;

    use tower::ServiceExt;

    fn request(uri: &str) -> Request<Body> {
        Request::get(uri)
            .body(Body::empty())
            .expect("valid request")
    }

    #[test]
    fn failures_and_answers_flip_the_state_once_each() {
        let metrics = Metrics::default();
        let api = Reachability::new(DEFAULT_REQUEST_TIMEOUT, Some(metrics.clone()));
        let mut changes = api.subscribe();
        assert!(api.is_reachable());
        api.record(Outcome::Failed("transport"), None);
        api.record(Outcome::Failed("transport"), None);
        assert!(!api.is_reachable() && api.unreachable_for().is_some());
        assert!(changes.has_changed().unwrap() && changes.borrow_and_update().is_some());
        assert_eq!(metrics.api_reachable.get(), 0);
        api.record(Outcome::of_status(StatusCode::NOT_FOUND), None);
        assert!(api.is_reachable());
        assert!(changes.borrow_and_update().is_none());
        assert_eq!(metrics.api_reachable.get(), 1);
        api.record(Outcome::of_status(StatusCode::SERVICE_UNAVAILABLE), None);
        assert!(!api.is_reachable(), "a 503 is the API server not serving");
    }

    #[test]
    fn only_watch_requests_count_as_watches() {
        assert!(is_watch(&request(
            "/api/v1/services?labelSelector=a%3Db&watch=true&resourceVersion=1"
        )));
        assert!(!is_watch(&request("/api/v1/services?limit=500")));
        assert!(!is_watch(&request("/api/v1/namespaces/watch/services")));
    }

    #[tokio::test]
    async fn a_hanging_request_times_out_and_a_hanging_watch_does_not() {
        let api = Reachability::new(Duration::from_millis(50), None);
        let hang = tower::service_fn(|_: Request<Body>| {
            std::future::pending::<Result<Response<Body>, Infallible>>()
        });
        let mut service = api.layer().layer(hang);
        let error = service
            .ready()
            .await
            .unwrap()
            .call(request("/api/v1/services"))
            .await
            .expect_err("times out");
        assert!(error.is::<TimedOut>(), "{error}");
        assert!(!api.is_reachable());

        let watch = service.call(request("/api/v1/services?watch=true"));
        let waited = tokio::time::timeout(Duration::from_millis(300), watch).await;
        assert!(waited.is_err(), "a watch stays open");
    }

    #[tokio::test]
    async fn an_answer_marks_it_reachable_again() {
        let api = Reachability::new(DEFAULT_REQUEST_TIMEOUT, None);
        api.record(Outcome::Failed("transport"), None);
        let ok = tower::service_fn(|_: Request<Body>| async {
            Ok::<_, Infallible>(Response::new(Body::empty()))
        });
        let mut service = api.layer().layer(ok);
        service
            .ready()
            .await
            .unwrap()
            .call(request("/api/v1/services?watch=true"))
            .await
            .unwrap();
        assert!(api.is_reachable());
    }
}
