//! The operator's HTTP endpoints: `/metrics` on one address, `/healthz` and `/readyz` on another.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::readiness::{Readiness, Verdict};
use crate::{Error, Result};

/// Binds `addr`; `port 0` picks a free port. Returns the listener and the bound address.
pub async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Serve { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Serve { addr, source })?;
    Ok((listener, bound))
}

/// The `/metrics` router.
pub fn metrics_router(registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(registry)
}

/// The `/healthz` and `/readyz` router.
pub fn probes_router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let addr = listener.local_addr().map_err(|source| Error::Serve {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| Error::Serve { addr, source })
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::encode(&registry),
    )
}

/// `200 ready` on the leader (or without leader election), `200 standby` on a replica waiting
/// for the Lease with its guest loaded, else `503` with the reason; then the notes, one per line
/// (where the guests in force came from, a candidate being retried).
async fn readyz(State(readiness): State<Arc<Readiness>>) -> impl IntoResponse {
    let (code, verdict) = match readiness.verdict() {
        Verdict::Ready => (StatusCode::OK, "ready".to_owned()),
        Verdict::Standby => (StatusCode::OK, "standby".to_owned()),
        Verdict::NotReady(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        ),
    };
    let body = std::iter::once(verdict)
        .chain(readiness.notes())
        .collect::<Vec<_>>()
        .join("\n");
    (code, body)
}
