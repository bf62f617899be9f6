//! The operator's HTTP endpoints: `/metrics` on one address, `/healthz` and `/readyz` on another.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::{Error, Result};

/// Whether the operator can do its job: caches synced and a guest loaded, or, with leader
/// election, a guest loaded and standing by for the Lease.
#[derive(Debug, Default)]
pub struct Readiness {
    caches_synced: AtomicBool,
    guest_loaded: AtomicBool,
    standby: AtomicBool,
}

impl Readiness {
    /// Records that every watch cache has listed its objects once.
    pub fn caches_synced(&self) {
        self.caches_synced.store(true, Ordering::Release);
    }

    /// Records that a guest is loaded and callable.
    pub fn guest_loaded(&self) {
        self.guest_loaded.store(true, Ordering::Release);
    }

    /// Records whether this replica stands by for the leader Lease (and so runs no controller).
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Release);
    }

    /// True while this replica stands by for the leader Lease.
    pub fn is_standby(&self) -> bool {
        self.standby.load(Ordering::Acquire)
    }

    /// True once both caches are synced and a guest is loaded.
    pub fn is_ready(&self) -> bool {
        self.caches_synced.load(Ordering::Acquire) && self.guest_loaded.load(Ordering::Acquire)
    }
}

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
/// for the Lease with its guest loaded, else `503`.
///
/// NB: a standby is ready on purpose: were it not, a rolling update of two replicas would wait
/// forever for a new Pod that cannot lead while the old leader runs.
async fn readyz(State(readiness): State<Arc<Readiness>>) -> impl IntoResponse {
    if readiness.is_ready() {
        (StatusCode::OK, "ready")
    } else if readiness.is_standby() && readiness.guest_loaded.load(Ordering::Acquire) {
        (StatusCode::OK, "standby")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get_status(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let code = response[9..12].parse().unwrap();
        (code, response)
    }

    #[tokio::test]
    async fn readyz_waits_for_caches_and_guest() {
        let readiness = Arc::new(Readiness::default());
        let (listener, addr) = bind(([127, 0, 0, 1], 0).into()).await.unwrap();
        let router = probes_router(readiness.clone());
        tokio::spawn(serve(listener, router, std::future::pending()));

        assert_eq!(get_status(addr, "/healthz").await.0, 200);
        assert_eq!(get_status(addr, "/readyz").await.0, 503);
        readiness.caches_synced();
        assert_eq!(get_status(addr, "/readyz").await.0, 503);
        readiness.guest_loaded();
        assert_eq!(get_status(addr, "/readyz").await.0, 200);
    }

    #[tokio::test]
    async fn readyz_reports_a_standby() {
        let readiness = Arc::new(Readiness::default());
        let (listener, addr) = bind(([127, 0, 0, 1], 0).into()).await.unwrap();
        tokio::spawn(serve(
            listener,
            probes_router(readiness.clone()),
            std::future::pending(),
        ));

        readiness.set_standby(true);
        assert_eq!(get_status(addr, "/readyz").await.0, 503, "no guest yet");
        readiness.guest_loaded();
        let (code, body) = get_status(addr, "/readyz").await;
        assert_eq!(code, 200);
        assert!(body.ends_with("standby"), "{body}");
        readiness.set_standby(false);
        readiness.caches_synced();
        let (code, body) = get_status(addr, "/readyz").await;
        assert_eq!(code, 200);
        assert!(body.ends_with("ready"), "{body}");
    }

    #[tokio::test]
    async fn metrics_are_served() {
        let mut registry = crate::metrics::registry();
        crate::metrics::Metrics::register(&mut registry);
        let (listener, addr) = bind(([127, 0, 0, 1], 0).into()).await.unwrap();
        tokio::spawn(serve(
            listener,
            metrics_router(Arc::new(registry)),
            std::future::pending(),
        ));
        let (code, body) = get_status(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("app_operator_reconciles_total"), "{body}");
    }
}
