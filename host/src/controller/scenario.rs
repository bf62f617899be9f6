//! The harness of the reconcile scenario tests: a [`Context`] whose client talks to a mocked API
//! server (`tower-test`), which checks that a reconcile sends the expected requests and nothing
//! else, as kube-rs `controller-rs` does with its `ApiServerVerifier`.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use http::request::Parts;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use kube::runtime::reflector;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tower_test::mock::{self, Handle};

use super::apply::Children;
use super::cache::{Cache, OwnerIndex};
use super::per_app::PerApp;
use super::{Config, Context};
use crate::consts::FIELD_MANAGER;
use crate::crd::AppService;
use crate::{guest, namespaces, swap};

/// Longest wait for the next expected request, so that a missing one fails the test instead of
/// hanging it (guest calls included: the request after a guest call waits for it).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// The guest runtime the scenarios load their guests into.
///
/// NB: a generous deadline: a missed deadline is transient (retried, never rolled back), and a
/// busy test machine must not turn a scenario into another one.
pub(super) static RUNTIME: LazyLock<guest::Runtime> = LazyLock::new(|| {
    let config = guest::Config {
        deadline: Duration::from_secs(10),
        ..guest::Config::default()
    };
    guest::Runtime::new(config).expect("the scenario runtime's config is valid")
});

/// The hostile test guest (`tests/guests/hostile`): it traps on an AppService labelled
/// `hostile.kudevops.io/misdeed: panic`.
pub(super) fn trapping_guest() -> guest::Policy {
    RUNTIME
        .load_blocking(crate::testing::hostile_guest())
        .expect("the hostile guest loads")
}

/// The default guest.
pub(super) fn default_guest() -> guest::Policy {
    RUNTIME
        .load_default_blocking()
        .expect("the default guest loads")
}

impl Context {
    /// A context around a mocked API server, rendering with `guests`: empty child caches marked
    /// synced, no namespace levels, and no settle window (every status is written at once).
    pub(super) fn for_test(guests: swap::Guests) -> (Arc<Self>, ApiServer) {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let config = Config {
            status_settle: Duration::ZERO,
            ..Config::default()
        };
        let children = Children {
            deployments: Cache::new(reflector::store().0, OwnerIndex::default()),
            services: Cache::new(reflector::store().0, OwnerIndex::default()),
            last_applied: Arc::default(),
            own_writes: Arc::default(),
        };
        let ctx = Context {
            recorder: config.recorder(&client),
            client,
            guests,
            metrics: crate::metrics::Metrics::default(),
            children,
            levels: namespaces::Levels::new(reflector::store().0),
            per_app: Arc::new(PerApp::new(config.status_settle)),
            config,
            synced: watch::channel(true).1,
        };
        (Arc::new(ctx), ApiServer(handle))
    }
}

/// Checks one request's head and JSON body and returns the JSON body of the reply.
type Respond = Box<dyn FnOnce(&Parts, Value) -> Value + Send>;

/// One request a scenario expects, by method and path, and how to check and answer it.
pub(super) struct Expect {
    method: Method,
    path: String,
    respond: Respond,
}

impl Expect {
    /// A `method` request to `path` (without the query), checked and answered by `respond`.
    pub(super) fn new(
        method: Method,
        path: &str,
        respond: impl FnOnce(&Parts, Value) -> Value + Send + 'static,
    ) -> Self {
        Self {
            method,
            path: path.to_owned(),
            respond: Box::new(respond),
        }
    }

    /// A server-side apply to `path` (forced, with the operator's field manager), checked by
    /// `check` and answered with the applied object as created: uid and resourceVersion set.
    pub(super) fn apply(path: &str, check: impl FnOnce(&Value) + Send + 'static) -> Self {
        let uid = format!("uid-of-{path}");
        Self::new(Method::PATCH, path, move |parts, mut body| {
            assert_server_side_apply(parts);
            check(&body);
            body["metadata"]["uid"] = json!(uid);
            body["metadata"]["resourceVersion"] = json!("2");
            body
        })
    }

    /// A server-side apply of `app`'s status, checked by `check` (given the status written) and
    /// answered with `app` carrying it.
    pub(super) fn status(app: &AppService, check: impl FnOnce(&Value) + Send + 'static) -> Self {
        let path = format!(
            "/apis/apps.kudevops.io/v1alpha1/namespaces/{}/appservices/{}/status",
            app.namespace().unwrap_or_default(),
            app.name_any()
        );
        let app = app.clone();
        Self::new(Method::PATCH, &path, move |parts, body| {
            assert_server_side_apply(parts);
            let status = &body["status"];
            check(status);
            let mut app = serde_json::to_value(app).expect("an AppService serializes");
            app["status"] = status.clone();
            app
        })
    }

    /// An Event created (POSTed) in namespace `ns`, checked by `check` and echoed back.
    pub(super) fn event(ns: &str, check: impl FnOnce(&Value) + Send + 'static) -> Self {
        let path = format!("/apis/events.k8s.io/v1/namespaces/{ns}/events");
        Self::new(Method::POST, &path, move |_, body| {
            check(&body);
            body
        })
    }

    fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Asserts that `parts` is a forced server-side apply with the operator's field manager.
pub(super) fn assert_server_side_apply(parts: &Parts) {
    let content_type = parts.headers.get(http::header::CONTENT_TYPE);
    assert_eq!(
        content_type.and_then(|v| v.to_str().ok()),
        Some("application/apply-patch+yaml"),
        "{} is not a server-side apply",
        parts.uri
    );
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        query.get("fieldManager").map(String::as_str),
        Some(FIELD_MANAGER),
        "{}",
        parts.uri
    );
    assert_eq!(
        query.get("force").map(String::as_str),
        Some("true"),
        "{}",
        parts.uri
    );
}

/// The mocked API server's side of the client of [`Context::for_test`].
pub(super) struct ApiServer(Handle<Request<Body>, Response<Body>>);

/// A running [`ApiServer::serve`]; [`Served::finish`] waits for its verdict.
pub(super) struct Served(JoinHandle<()>);

impl ApiServer {
    /// Serves `steps` in order. The requests of one step may come in any order (the reconcile
    /// sends them at once), each at most once; a request no step expects fails the scenario,
    /// as does one missing for [`REQUEST_TIMEOUT`]. After the last step any request fails it,
    /// until the client is dropped.
    pub(super) fn serve(self, steps: Vec<Vec<Expect>>) -> Served {
        let mut handle = self.0;
        Served(tokio::spawn(async move {
            for mut step in steps {
                while !step.is_empty() {
                    answer_one(&mut handle, &mut step).await;
                }
            }
            let after = tokio::time::timeout(REQUEST_TIMEOUT, handle.next_request()).await;
            match after {
                Ok(None) => {}
                Ok(Some((request, _))) => {
                    let (method, uri) = (request.method(), request.uri());
                    panic!("unexpected {method} {uri} after the scenario");
                }
                Err(_) => panic!("the client was not dropped after the scenario"),
            }
        }))
    }
}

/// Waits for the next request, which must be one of `expected`, and answers it.
async fn answer_one(
    handle: &mut Handle<Request<Body>, Response<Body>>,
    expected: &mut Vec<Expect>,
) {
    let missing: Vec<String> = expected.iter().map(Expect::describe).collect();
    let next = tokio::time::timeout(REQUEST_TIMEOUT, handle.next_request()).await;
    let (request, reply) = match next {
        Ok(Some(request)) => request,
        Ok(None) => panic!("the client was dropped; expected {missing:?}"),
        Err(_) => panic!("no request within {REQUEST_TIMEOUT:?}; expected {missing:?}"),
    };
    let (parts, body) = request.into_parts();
    let Some(found) = expected
        .iter()
        .position(|e| e.method == parts.method && e.path == parts.uri.path())
    else {
        let (method, uri) = (&parts.method, &parts.uri);
        panic!("unexpected {method} {uri}; expected {missing:?}");
    };
    let bytes = body
        .collect()
        .await
        .expect("the request body is read")
        .to_bytes();
    let body: Value = serde_json::from_slice(&bytes).expect("the request body is JSON");
    let answer = (expected.swap_remove(found).respond)(&parts, body);
    let response = Response::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            serde_json::to_vec(&answer).expect("the reply serializes"),
        ))
        .expect("the reply is a valid response");
    reply.send_response(response);
}

impl Served {
    /// Waits until the client is dropped, then fails the test if the scenario failed.
    pub(super) async fn finish(self) {
        if let Err(err) = self.0.await {
            std::panic::resume_unwind(err.into_panic());
        }
    }
}
