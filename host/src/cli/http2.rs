//! kube's client stack to the API server with HTTP/2 offered by ALPN: every request and watch
//! on one TLS connection, as client-go talks to it.
//!
//! kube 5 builds its connector for HTTP/1.1 only, so an operator with 16 reconciles in flight
//! and its watches held about 35 connections, each with its own TLS session and buffers. This is
//! the same stack (base URI, authentication, extra headers, retry of 429/503/504) over a
//! connector that offers `h2` and `http/1.1`; a server that does not take `h2` is spoken
//! HTTP/1.1 to. A dead connection is found by HTTP/2 pings, as client-go finds it: every
//! [`PING_INTERVAL`] while a stream is open, given up after [`PING_TIMEOUT`] without an answer.
//!
//! Not covered, and left to kube's own stack ([`builder`] returns `None`): a proxy (the
//! `proxy-url` kube's config carries). Left out of this stack: kube's per-request
//! `debug` spans (`kube_client` at `debug` shows no request lines) and its connector's read and
//! write timeouts, which a kubeconfig does not set (the reachability layer bounds every request
//! but the watches).

use std::time::Duration;

use http::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody};
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt};

use crate::{Error, Result};

/// How often an open connection is pinged (client-go's `ReadIdleTimeout`).
pub(super) const PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection is dropped (client-go's
/// `PingTimeout`).
pub(super) const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// The service type kube's own builder produces, so that the layers above fit either stack.
pub(super) type Generic = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// A client builder for `config` whose connections offer HTTP/2, or `None` when `config`
/// names a proxy (kube's stack handles proxies).
pub(super) fn builder(config: &kube::Config) -> Result<Option<ClientBuilder<Generic>>> {
    if config.proxy_url.is_some() {
        return Ok(None);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    let tls = config.rustls_client_config().map_err(Error::Client)?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let https = match &config.tls_server_name {
        Some(name) => {
            let name = name.clone().try_into().map_err(|_| {
                Error::Client(kube::Error::Service(
                    format!("invalid TLS server name {name:?}").into(),
                ))
            })?;
            https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => https,
    };
    let https = https.enable_all_versions().wrap_connector(http);
    let client: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .http2_keep_alive_interval(PING_INTERVAL)
            .http2_keep_alive_timeout(PING_TIMEOUT)
            .build(https);
    let retry = config
        .default_retry
        .then(|| RetryLayer::new(RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer().map_err(Error::Client)?)
        .layer(config.extra_headers_layer().map_err(Error::Client)?)
        .map_err(BoxError::from)
        .service(client)
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .boxed();
    Ok(Some(ClientBuilder::new(
        service,
        config.default_namespace.clone(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> kube::Config {
        kube::Config::new("https://127.0.0.1:6443".parse().expect("a URL"))
    }

    #[test]
    fn a_direct_connection_gets_the_http2_stack_and_a_proxy_kube_s_own() {
        let direct = builder(&config()).expect("a client stack");
        assert!(direct.is_some());
        let mut proxied = config();
        proxied.proxy_url = Some("http://proxy.example:3128".parse().expect("a URL"));
        assert!(builder(&proxied).expect("no error").is_none());
    }

    #[test]
    fn a_tls_server_name_that_is_no_name_is_an_error() {
        let mut named = config();
        named.tls_server_name = Some("not a name!".to_owned());
        assert!(builder(&named).is_err());
    }
}
