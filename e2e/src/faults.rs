//! A fault proxy between the operator and the API server: Toxiproxy's server, one per test, whose
//! proxies can be cut, slowed down and reset, and kubeconfigs and clients that go through them.
//!
//! The server is the `toxiproxy-server` that `hack/controlplane/build-toxiproxy.sh` builds (run by
//! `hack/setup.sh`): `$TOXIPROXY_SERVER` (exported by `hack/controlplane/env.sh`), else the path
//! `hack/controlplane/lib.sh` computes for it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::process::free_port;
use crate::wait;

mod kubeconfig;

pub use kubeconfig::{api_server_addr, client_through, kubeconfig_through, kubeconfig_via};

/// The hint every "no Toxiproxy" failure carries.
const BUILD_HINT: &str = "run `hack/setup.sh` (it builds toxiproxy-server from Go modules)";

/// The `toxiproxy-server` binary the tests run.
///
/// Fails, saying to run `hack/setup.sh`, when it is not built.
pub fn binary() -> anyhow::Result<PathBuf> {
    let binary = match std::env::var_os("TOXIPROXY_SERVER").filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => {
            let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hack/controlplane/lib.sh");
            let output = Command::new("bash")
                .arg("-c")
                .arg(r#"source "$1" && cp_toxiproxy_dir"#)
                .arg("bash")
                .arg(&lib)
                .output()
                .with_context(|| format!("failed to run cp_toxiproxy_dir of {}", lib.display()))?;
            if !output.status.success() {
                bail!(
                    "cp_toxiproxy_dir of {} failed: {}",
                    lib.display(),
                    String::from_utf8_lossy(&output.stderr).trim()
                );
            }
            PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("toxiproxy-server")
        }
    };
    if !binary.is_file() {
        bail!("no toxiproxy-server at {}; {BUILD_HINT}", binary.display());
    }
    Ok(binary)
}

/// A running `toxiproxy-server` on a free loopback port. Dropping it kills the process, and
/// with it every proxy.
pub struct Toxiproxy {
    child: Child,
    api: ApiClient,
    /// The server's stdout and stderr.
    pub log: PathBuf,
}

impl Toxiproxy {
    /// Starts the server with its log in `<log_dir>/toxiproxy.log`, and waits until its API
    /// answers.
    pub async fn start(log_dir: &Path) -> anyhow::Result<Self> {
        let binary = binary()?;
        let port = free_port()?;
        std::fs::create_dir_all(log_dir)?;
        let log = log_dir.join("toxiproxy.log");
        let out = std::fs::File::create(&log)
            .with_context(|| format!("failed to create {}", log.display()))?;
        let child = Command::new(&binary)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("failed to start {}", binary.display()))?;
        let mut toxiproxy = Self {
            child,
            api: ApiClient::new(SocketAddr::from(([127, 0, 0, 1], port))),
            log,
        };
        let what = format!("Toxiproxy's API (log: {})", toxiproxy.log.display());
        let api = toxiproxy.api.clone();
        let child = &mut toxiproxy.child;
        wait::until(&what, Duration::from_secs(20), || {
            let exited = child.try_wait();
            let api = api.clone();
            async move {
                if let Some(status) = exited? {
                    bail!("toxiproxy-server exited ({status})");
                }
                Ok(api.call(Method::GET, "/version", None).await.ok())
            }
        })
        .await?;
        Ok(toxiproxy)
    }

    /// Creates proxy `name` listening on a free 127.0.0.1 port and forwarding to `upstream`
    /// (`host:port`).
    pub async fn proxy(&self, name: &str, upstream: &str) -> anyhow::Result<Proxy> {
        let body = json!({"name": name, "listen": "127.0.0.1:0", "upstream": upstream});
        let created = self
            .api
            .call(Method::POST, "/proxies", Some(body))
            .await
            .with_context(|| format!("failed to create proxy {name} to {upstream}"))?;
        // NB: Toxiproxy picks the port for a listen port of 0 and answers with the address.
        let listen = created["listen"]
            .as_str()
            .and_then(|l| l.parse().ok())
            .with_context(|| format!("proxy {name}: no listen address in {created}"))?;
        Ok(Proxy {
            name: name.to_owned(),
            listen,
            api: self.api.clone(),
        })
    }

    /// Creates proxy `name` to the tests' API server (see [`api_server_addr`]).
    pub async fn api_server_proxy(&self, name: &str) -> anyhow::Result<Proxy> {
        self.proxy(name, &api_server_addr().await?).await
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A direction of a proxy's traffic, as Toxiproxy names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Client to server: the requests.
    Upstream,
    /// Server to client: the responses and watch events.
    Downstream,
}

impl Stream {
    /// Both directions.
    pub const BOTH: [Stream; 2] = [Stream::Upstream, Stream::Downstream];

    fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// One proxy of a [`Toxiproxy`]: its listen address, and the faults to put on it.
///
/// A toxic acts on the connections open when it is added and on every new one, until removed.
pub struct Proxy {
    name: String,
    listen: SocketAddr,
    api: ApiClient,
}

impl Proxy {
    /// The address clients connect to.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// Takes the proxy down, an outage: its open connections are closed and new ones refused.
    pub async fn disable(&self) -> anyhow::Result<()> {
        self.set_enabled(false).await
    }

    /// Brings the proxy back up after [`Proxy::disable`].
    pub async fn enable(&self) -> anyhow::Result<()> {
        self.set_enabled(true).await
    }

    async fn set_enabled(&self, enabled: bool) -> anyhow::Result<()> {
        let path = format!("/proxies/{}", self.name);
        self.api
            .call(Method::POST, &path, Some(json!({"enabled": enabled})))
            .await
            .with_context(|| format!("failed to set proxy {} enabled={enabled}", self.name))?;
        Ok(())
    }

    /// Delays all data going `stream` by `ms` milliseconds.
    pub async fn latency(&self, stream: Stream, ms: u64) -> anyhow::Result<()> {
        self.toxic("latency", stream, json!({"latency": ms, "jitter": 0}))
            .await
    }

    /// Resets connections (TCP RST): each one's next data going `stream` is dropped and the
    /// connection reset `timeout_ms` later. Every connection, open or new, is reset while the
    /// toxic stays: remove it ([`Proxy::clear_toxics`]) to let traffic through again.
    pub async fn reset_peer(&self, stream: Stream, timeout_ms: u64) -> anyhow::Result<()> {
        self.toxic("reset_peer", stream, json!({"timeout": timeout_ms}))
            .await
    }

    /// Drops all data going `stream`, silently; closes the connection after `timeout_ms`, or
    /// never when it is 0 (see [`Proxy::blackhole`]).
    pub async fn timeout(&self, stream: Stream, timeout_ms: u64) -> anyhow::Result<()> {
        self.toxic("timeout", stream, json!({"timeout": timeout_ms}))
            .await
    }

    /// A one-way partition: data going `stream` vanishes and no connection is closed, as when
    /// packets are dropped on the way.
    pub async fn blackhole(&self, stream: Stream) -> anyhow::Result<()> {
        self.timeout(stream, 0).await
    }

    /// Removes every toxic of the proxy.
    pub async fn clear_toxics(&self) -> anyhow::Result<()> {
        let path = format!("/proxies/{}/toxics", self.name);
        let toxics = self.api.call(Method::GET, &path, None).await?;
        for name in toxics
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
        {
            self.api
                .call(Method::DELETE, &format!("{path}/{name}"), None)
                .await
                .with_context(|| format!("failed to remove toxic {name} of {}", self.name))?;
        }
        Ok(())
    }

    /// Adds toxic `type_` on `stream`, named `<type>_<stream>` (one of each per proxy).
    async fn toxic(&self, type_: &str, stream: Stream, attributes: Value) -> anyhow::Result<()> {
        let name = format!("{type_}_{}", stream.as_str());
        let body = json!({
            "name": name,
            "type": type_,
            "stream": stream.as_str(),
            "toxicity": 1.0,
            "attributes": attributes,
        });
        self.api
            .call(
                Method::POST,
                &format!("/proxies/{}/toxics", self.name),
                Some(body),
            )
            .await
            .with_context(|| format!("failed to add toxic {name} to {}", self.name))?;
        Ok(())
    }
}

/// Toxiproxy's HTTP JSON API at one address.
#[derive(Clone)]
struct ApiClient {
    base: String,
    http: HttpClient<HttpConnector, Full<Bytes>>,
}

impl ApiClient {
    fn new(addr: SocketAddr) -> Self {
        Self {
            base: format!("http://{addr}"),
            http: HttpClient::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// Sends `method path` with the JSON `body`; returns the JSON answer (`null` when empty, a
    /// string when not JSON, as `/version`'s). A status other than 2xx is an error carrying
    /// Toxiproxy's message.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let request = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.base))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))?;
        let response = tokio::time::timeout(Duration::from_secs(10), self.http.request(request))
            .await
            .with_context(|| format!("{method} {path}: no answer within 10 s"))?
            .with_context(|| format!("{method} {path} failed"))?;
        let status = response.status();
        let json = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
        let bytes = response.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            bail!(
                "{method} {path}: {status}: {}",
                String::from_utf8_lossy(&bytes).trim()
            );
        }
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        if !json {
            return Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        }
        serde_json::from_slice(&bytes).with_context(|| format!("{method} {path}: not JSON"))
    }
}
