//! The guest ConfigMap as the source of guests: watched, each new content validated (load,
//! pin, dry run on every live AppService), then put in force or rejected.
//!
//! Without the ConfigMap (never created, or deleted) the base guest runs: the embedded default
//! guest, or the `--guest` file. Deleting the ConfigMap therefore reverts to the base guest,
//! through the same validation, so a running operator behaves as a freshly started one would.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::validate::{self, Failure};
use super::{Canary, Guests, Set, selector};
use crate::consts::{
    ANNOTATION_CANARY_SELECTOR, ANNOTATION_GUEST_ACTIVE, ANNOTATION_GUEST_CANARY,
    ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_PIN, ANNOTATION_GUEST_STATE, CANARY_KEY, GUEST_KEY,
};
use crate::crd::AppService;
use crate::metrics::Metrics;
use crate::{controller, error_chain, guest, namespaces};

/// Where the guests come from.
#[derive(Clone, Debug)]
pub struct Config {
    /// Namespace of the guest ConfigMap (the operator's own).
    pub namespace: String,
    /// Name of the guest ConfigMap.
    pub name: String,
    /// Namespace of the AppServices the guests govern; `None` for all.
    pub apps_namespace: Option<String>,
}

/// Why a candidate was not put in force. [`Rejection::kind`] is a fixed metric label.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// The ConfigMap is not shaped as a guest ConfigMap.
    #[error("malformed guest ConfigMap: {0}")]
    Malformed(String),
    /// The canary selector does not parse.
    #[error(transparent)]
    Selector(#[from] selector::Error),
    /// The bytes are not a guest of a supported contract version.
    #[error("failed to load the {role} guest")]
    Load {
        /// `stable` or `canary`.
        role: &'static str,
        /// What the runtime said.
        #[source]
        source: guest::Error,
    },
    /// The stable guest does not match the pinned digest.
    #[error("guest {digest} does not match the pinned {pin}")]
    Pin {
        /// Digest of the bytes.
        digest: String,
        /// The pin annotation.
        pin: String,
    },
    /// The live AppServices could not be listed for the dry run.
    #[error("failed to list AppServices for the dry run")]
    List(#[source] kube::Error),
    /// The namespaces' Pod Security labels could not be read for the dry run.
    #[error("failed to read the namespaces of the AppServices for the dry run")]
    Namespaces(#[source] kube::Error),
    /// A guest failed on a live AppService.
    #[error(transparent)]
    DryRun(#[from] Failure),
}

impl Rejection {
    /// A fixed, low-cardinality name of the reason.
    pub fn kind(&self) -> &'static str {
        match self {
            Rejection::Malformed(_) => "malformed",
            Rejection::Selector(_) => "selector",
            Rejection::Load { .. } => "load",
            Rejection::Pin { .. } => "pin",
            Rejection::List(_) => "list",
            Rejection::Namespaces(_) => "namespaces",
            Rejection::DryRun(_) => "dry_run",
        }
    }
}

/// Watches the guest ConfigMap and keeps [`Guests`] in step with it.
pub struct Source {
    client: Client,
    runtime: guest::Runtime,
    base: Arc<[u8]>,
    guests: Guests,
    metrics: Metrics,
    recorder: Recorder,
    config: Config,
    /// The last candidate evaluated and why it was rejected, so that an unchanged one is not
    /// tried again.
    last: Option<(CandidateKey, Option<String>)>,
}

type CandidateKey = (String, Option<(String, String)>, Option<String>);

impl Source {
    /// A source whose base guest (no ConfigMap) is `base`.
    pub fn new(
        client: Client,
        runtime: guest::Runtime,
        base: Arc<[u8]>,
        guests: Guests,
        metrics: Metrics,
        recorder: Recorder,
        config: Config,
    ) -> Self {
        Self {
            client,
            runtime,
            base,
            guests,
            metrics,
            recorder,
            config,
            last: None,
        }
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    /// Reads the ConfigMap once and evaluates it; call before the controller starts so that it
    /// does not begin with the base guest only to swap a moment later.
    pub async fn sync_once(&mut self) -> Result<(), kube::Error> {
        let cm = self.api().get_opt(&self.config.name).await?;
        self.evaluate(cm.as_ref()).await;
        Ok(())
    }

    /// Watches the ConfigMap until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let fields = format!("metadata.name={}", self.config.name);
        let stream =
            watcher(self.api(), watcher::Config::default().fields(&fields)).default_backoff();
        let mut stream = std::pin::pin!(stream.take_until(shutdown));
        let mut seen = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => seen = false,
                Ok(watcher::Event::InitApply(cm) | watcher::Event::Apply(cm)) => {
                    seen = true;
                    self.evaluate(Some(&cm)).await;
                }
                Ok(watcher::Event::Delete(cm)) => {
                    info!(configmap = %cm.name_any(), "guest ConfigMap deleted; reverting to the base guest");
                    self.evaluate_as(None, Some(&cm)).await;
                }
                Ok(watcher::Event::InitDone) if !seen => self.evaluate(None).await,
                Ok(watcher::Event::InitDone) => {}
                Err(err) => warn!(error = %error_chain(&err), "guest ConfigMap watch failed"),
            }
        }
    }

    /// Evaluates the ConfigMap's content (`None`: no ConfigMap) and puts it in force if it
    /// passes; reports the outcome either way.
    async fn evaluate(&mut self, cm: Option<&ConfigMap>) {
        self.evaluate_as(cm, cm).await;
    }

    /// [`Source::evaluate`] of `cm`, reporting Events about `about` (a deleted ConfigMap gets
    /// Events but no status annotations).
    async fn evaluate_as(&mut self, cm: Option<&ConfigMap>, about: Option<&ConfigMap>) {
        let binary = |key: &str| {
            cm.and_then(|c| c.binary_data.as_ref())
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
        };
        let annotation = |key: &str| cm.and_then(|c| c.annotations().get(key).cloned());
        let stable: Arc<[u8]> = binary(GUEST_KEY).map_or_else(|| self.base.clone(), Into::into);
        let canary = binary(CANARY_KEY).map(|wasm| {
            let selector = annotation(ANNOTATION_CANARY_SELECTOR).unwrap_or_default();
            (wasm, selector)
        });
        let pin = annotation(ANNOTATION_GUEST_PIN);
        let malformed = cm.and_then(malformed);
        let key: CandidateKey = match &malformed {
            // NB: a distinct key, so that a malformed ConfigMap is never taken for the guests
            // in force, and is reported once.
            Some(problem) => (format!("malformed: {problem}"), None, None),
            None => (
                guest::digest(&stable),
                canary.as_ref().map(|(w, s)| (guest::digest(w), s.clone())),
                pin.clone(),
            ),
        };
        let in_force = self.guests.current().key();
        if let Some((last, rejected)) = &self.last
            && *last == key
        {
            // NB: `guest push` clears the state annotation; answer it again.
            if cm.is_some_and(|c| !c.annotations().contains_key(ANNOTATION_GUEST_STATE)) {
                self.write_status(cm, rejected.clone()).await;
            }
            return;
        }
        if (&key.0, &key.1) == (&in_force.0, &in_force.1) {
            self.last = Some((key, None));
            self.write_status(cm, None).await;
            return;
        }
        self.last = Some((key.clone(), None));
        let candidate = match malformed {
            Some(problem) => Err(Rejection::Malformed(problem)),
            None => self.candidate(stable, canary, pin).await,
        };
        match candidate {
            Ok((set, rendered)) => {
                let digest = set.stable.digest().to_owned();
                let canary = set.canary.as_ref().map(|c| c.policy.digest().to_owned());
                self.guests.activate(set.stable, set.canary);
                self.metrics.guest_swapped();
                self.metrics.guests_active(&self.guests.current());
                info!(%digest, ?canary, rendered, "guest activated");
                let note = match &canary {
                    Some(c) => format!(
                        "stable {digest}, canary {c}; dry run passed on {rendered} AppServices"
                    ),
                    None => format!("{digest}; dry run passed on {rendered} AppServices"),
                };
                self.report(about, EventType::Normal, "GuestActivated", note)
                    .await;
                self.write_status(cm, None).await;
            }
            Err(rejection) => {
                let message = error_chain(&rejection);
                self.metrics.guest_rejected(rejection.kind());
                warn!(reason = rejection.kind(), error = %message, "guest rejected; the last good guest stays in force");
                self.report(about, EventType::Warning, "GuestRejected", message.clone())
                    .await;
                self.last = Some((key, Some(message.clone())));
                self.write_status(cm, Some(message)).await;
            }
        }
    }

    /// Loads and checks a candidate set, then dry-runs it; returns it and how many AppServices
    /// it rendered.
    async fn candidate(
        &self,
        stable: Arc<[u8]>,
        canary: Option<(Vec<u8>, String)>,
        pin: Option<String>,
    ) -> Result<(Set, usize), Rejection> {
        let stable = self.load(stable, "stable").await?;
        if let Some(pin) = pin {
            let want = pin.strip_prefix("sha256:").unwrap_or(&pin);
            if stable.digest().strip_prefix("sha256:") != Some(want) {
                let digest = stable.digest().to_owned();
                return Err(Rejection::Pin { digest, pin });
            }
        }
        let canary = match canary {
            None => None,
            Some((wasm, selector_text)) => Some(Canary {
                selector: selector::parse(&selector_text)?,
                policy: self.load(wasm.into(), "canary").await?,
                selector_text,
            }),
        };
        let set = Set {
            stable,
            canary,
            previous: None,
        };
        let apps: Api<AppService> =
            controller::api(&self.client, self.config.apps_namespace.as_deref());
        let apps = apps
            .list(&ListParams::default())
            .await
            .map_err(Rejection::List)?;
        let namespaces = apps
            .items
            .iter()
            .filter_map(|a| a.metadata.namespace.as_deref());
        let levels = namespaces::lookup(&self.client, namespaces)
            .await
            .map_err(Rejection::Namespaces)?;
        let rendered = validate::dry_run(&set, &apps.items, &levels).await?;
        Ok((set, rendered))
    }

    async fn load(&self, wasm: Arc<[u8]>, role: &'static str) -> Result<guest::Policy, Rejection> {
        let runtime = self.runtime.clone();
        // NB: compiling takes tens of milliseconds of CPU; keep it off the async workers.
        tokio::task::spawn_blocking(move || runtime.load(&wasm))
            .await
            .map_err(guest::Error::Task)
            .and_then(|r| r)
            .map_err(|source| Rejection::Load { role, source })
    }

    /// Publishes an Event about the ConfigMap.
    async fn report(&self, cm: Option<&ConfigMap>, type_: EventType, reason: &str, note: String) {
        let Some(cm) = cm else {
            return;
        };
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: "Swap".into(),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&event, &cm.object_ref(&())).await {
            warn!(error = %err, reason, "failed to publish an event");
        }
    }

    /// Writes the status annotations on the ConfigMap: the guests in force and, after a
    /// rejection, why. Does nothing without a ConfigMap.
    async fn write_status(&self, cm: Option<&ConfigMap>, rejected: Option<String>) {
        let Some(cm) = cm else {
            return;
        };
        let set = self.guests.current();
        let mut annotations = BTreeMap::new();
        let state = if rejected.is_some() {
            "Rejected"
        } else {
            "Active"
        };
        annotations.insert(ANNOTATION_GUEST_STATE, Some(state.to_owned()));
        annotations.insert(
            ANNOTATION_GUEST_ACTIVE,
            Some(set.stable.digest().to_owned()),
        );
        let canary = set.canary.as_ref().map(|c| c.policy.digest().to_owned());
        annotations.insert(ANNOTATION_GUEST_CANARY, canary);
        annotations.insert(ANNOTATION_GUEST_MESSAGE, rejected);
        let patch = json!({ "metadata": { "annotations": annotations } });
        let params = PatchParams::default();
        if let Err(err) = self
            .api()
            .patch(&cm.name_any(), &params, &Patch::Merge(&patch))
            .await
        {
            warn!(error = %err, "failed to write the guest status annotations");
        }
    }
}

/// What is wrong with the shape of guest ConfigMap `cm`, if anything: the guests belong under
/// `binaryData` keys [`GUEST_KEY`] and [`CANARY_KEY`], and nothing else is expected there or
/// under `data` (a guest under `data`, or a misspelt key, would otherwise be silently ignored
/// and the base guest run instead). A ConfigMap with no keys at all is well-formed: it holds
/// no guest.
fn malformed(cm: &ConfigMap) -> Option<String> {
    let known = [GUEST_KEY, CANARY_KEY];
    if let Some(key) = cm.data.iter().flat_map(|d| d.keys()).next() {
        let hint = if known.contains(&key.as_str()) {
            "; a guest is binary and belongs under binaryData (`app-operator guest push` puts it there)"
        } else {
            ""
        };
        return Some(format!("unexpected key `{key}` under data{hint}"));
    }
    cm.binary_data
        .iter()
        .flat_map(|d| d.keys())
        .find(|key| !known.contains(&key.as_str()))
        .map(|key| {
            format!(
                "unexpected key `{key}` under binaryData; expected `{GUEST_KEY}` and `{CANARY_KEY}`"
            )
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::malformed;

    fn cm(data: &[&str], binary: &[&str]) -> ConfigMap {
        let data: BTreeMap<_, _> = data.iter().map(|k| (k.to_string(), "x".into())).collect();
        let binary: BTreeMap<_, _> = binary
            .iter()
            .map(|k| (k.to_string(), ByteString(vec![0])))
            .collect();
        ConfigMap {
            data: (!data.is_empty()).then_some(data),
            binary_data: (!binary.is_empty()).then_some(binary),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn guests_belong_under_binary_data_with_known_keys() {
        assert_eq!(malformed(&cm(&[], &[])), None);
        assert_eq!(malformed(&cm(&[], &["guest.wasm", "canary.wasm"])), None);
        let text = malformed(&cm(&["guest.wasm"], &[])).expect("a guest under data");
        assert!(text.contains("belongs under binaryData"), "{text}");
        let typo = malformed(&cm(&[], &["guest.wsm"])).expect("a misspelt key");
        assert!(typo.contains("`guest.wsm` under binaryData"), "{typo}");
    }
}
