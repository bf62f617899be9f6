//! The guest ConfigMap as the source of guests: watched, each new content validated (load,
//! pin, dry run on every live AppService), then put in force or rejected.
//!
//! Without the ConfigMap (never created, or deleted) the base guest runs: the embedded default
//! guest, or the `--guest` file. Deleting the ConfigMap therefore reverts to the base guest,
//! through the same validation, so a running operator behaves as a freshly started one would.
//!
//! Guests the ConfigMap's status annotations record as accepted are put back in force without
//! a dry run ([`accepted`]): a restarted operator, or a new leader, keeps the guest the fleet
//! ran. A candidate whose evaluation failed for a transient reason ([`Rejection::is_transient`])
//! is not rejected but evaluated again, with backoff.
//!
//! With trusted keys ([`Config::trusted_keys`]) every guest taken from the ConfigMap must carry
//! a signature by one of them ([`trust`]), checked before it is loaded; the base guest belongs
//! to the operator's own deployment and is not checked.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::validate::{self, Regressions};
use super::{Canary, Guests, Set, selector, server_dry_run, trust};
use crate::consts::{
    ANNOTATION_CANARY_SELECTOR, ANNOTATION_GUEST_ACTIVE, ANNOTATION_GUEST_CANARY,
    ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_PIN, ANNOTATION_GUEST_STATE, CANARY_KEY,
    CANARY_SIGNATURE_KEY, GUEST_KEY, GUEST_SIGNATURE_KEY,
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
    /// The keys every guest from the ConfigMap must be signed with (`--guest-trusted-key`);
    /// `None`: no signature is required, and any is ignored.
    pub trusted_keys: Option<Arc<trust::TrustedKeys>>,
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
    /// Trusted keys are configured and the guest carries no signature (`source` is `None`) or
    /// one that does not verify.
    #[error("the {role} guest {digest} {}", signature_problem(.source.as_ref()))]
    Signature {
        /// `stable` or `canary`.
        role: &'static str,
        /// Digest of the bytes.
        digest: String,
        /// Why the signature does not verify.
        #[source]
        source: Option<trust::Error>,
    },
    /// The live AppServices could not be listed for the dry run.
    #[error("failed to list AppServices for the dry run")]
    List(#[source] kube::Error),
    /// The namespaces' Pod Security labels could not be read for the dry run.
    #[error("failed to read the namespaces of the AppServices for the dry run")]
    Namespaces(#[source] kube::Error),
    /// The candidate would make things worse than the guests in force on live AppServices.
    #[error(transparent)]
    DryRun(#[from] Regressions),
}

/// The end of [`Rejection::Signature`]'s message.
fn signature_problem(source: Option<&trust::Error>) -> &'static str {
    match source {
        None => "is not signed, and --guest-trusted-key requires a signature",
        Some(_) => "fails the signature check",
    }
}

impl Rejection {
    /// A fixed, low-cardinality name of the reason.
    pub fn kind(&self) -> &'static str {
        match self {
            Rejection::Malformed(_) => "malformed",
            Rejection::Selector(_) => "selector",
            Rejection::Load { .. } => "load",
            Rejection::Pin { .. } => "pin",
            Rejection::Signature { .. } => "signature",
            Rejection::List(_) => "list",
            Rejection::Namespaces(_) => "namespaces",
            Rejection::DryRun(_) => "dry_run",
        }
    }

    /// Whether the verdict says nothing about the candidate, so that it is tried again rather
    /// than rejected: the API server did not answer, or a blocking task failed.
    pub fn is_transient(&self) -> bool {
        match self {
            Rejection::List(_) | Rejection::Namespaces(_) => true,
            Rejection::Load { source, .. } => matches!(source, guest::Error::Task(_)),
            Rejection::DryRun(regressions) => regressions.is_transient(),
            Rejection::Malformed(_)
            | Rejection::Selector(_)
            | Rejection::Pin { .. }
            | Rejection::Signature { .. } => false,
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
    /// A candidate to evaluate again after a transient failure, and when.
    retry: Option<Retry>,
    /// The delay before the next retry; `None` after a verdict.
    backoff: Option<Duration>,
    /// Whether no verdict was reached yet in this process, so that guests the ConfigMap
    /// records as accepted may be restored (later, the same digests under another canary
    /// selector, which the annotations do not record, are evaluated).
    starting: bool,
}

/// The first delay before evaluating a candidate again after a transient failure; it doubles
/// up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_secs(1);

/// The longest delay between two evaluations of a candidate that keep failing transiently.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// A candidate whose evaluation failed transiently: what [`Source::evaluate_as`] got.
struct Retry {
    cm: Option<ConfigMap>,
    about: Option<ConfigMap>,
    at: tokio::time::Instant,
}

/// What a verdict depends on: a ConfigMap with the key of the last one evaluated gets the same
/// verdict without being evaluated again.
#[derive(Clone, Debug, PartialEq, Eq)]
enum CandidateKey {
    /// A malformed ConfigMap, by its problem: never taken for the guests in force, and reported
    /// once.
    Malformed(String),
    /// A well-formed one.
    Guests {
        /// The digests of the guests and the canary's selector, as [`Set::key`] gives them.
        set: (String, Option<(String, String)>),
        /// The pin annotation.
        pin: Option<String>,
        /// The signatures of the stable and the canary guests (a new signature of the same
        /// guest is checked again).
        signatures: [Option<Vec<u8>>; 2],
    },
}

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
            retry: None,
            backoff: None,
            starting: true,
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
        loop {
            let retry_at = self.retry.as_ref().map(|r| r.at);
            let event = tokio::select! {
                event = stream.next() => match event {
                    Some(event) => event,
                    None => break,
                },
                () = sleep_until(retry_at) => {
                    if let Some(Retry { cm, about, .. }) = self.retry.take() {
                        self.evaluate_as(cm.as_ref(), about.as_ref()).await;
                    }
                    continue;
                }
            };
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
        self.retry = None;
        let binary = |key: &str| {
            cm.and_then(|c| c.binary_data.as_ref())
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
        };
        let annotation = |key: &str| cm.and_then(|c| c.annotations().get(key).cloned());
        let configured: Option<Arc<[u8]>> = binary(GUEST_KEY).map(Into::into);
        let stable = configured.clone().unwrap_or_else(|| self.base.clone());
        let canary = binary(CANARY_KEY).map(|wasm| {
            let selector = annotation(ANNOTATION_CANARY_SELECTOR).unwrap_or_default();
            (wasm, selector)
        });
        let pin = annotation(ANNOTATION_GUEST_PIN);
        let signatures = [binary(GUEST_SIGNATURE_KEY), binary(CANARY_SIGNATURE_KEY)];
        let malformed = cm.and_then(malformed);
        let key = match &malformed {
            Some(problem) => CandidateKey::Malformed(problem.clone()),
            None => CandidateKey::Guests {
                set: (
                    guest::digest(&stable),
                    canary.as_ref().map(|(w, s)| (guest::digest(w), s.clone())),
                ),
                pin: pin.clone(),
                signatures: signatures.clone(),
            },
        };
        let in_force = self.guests.current().key();
        let restore = match (&key, cm) {
            (CandidateKey::Guests { set, .. }, Some(cm)) => self.starting && accepted(cm, set),
            _ => false,
        };
        if let Some((last, rejected)) = &self.last
            && *last == key
        {
            self.backoff = None;
            // NB: `guest push` clears the state annotation; answer it again.
            if cm.is_some_and(|c| !c.annotations().contains_key(ANNOTATION_GUEST_STATE)) {
                self.write_status(cm, rejected.clone()).await;
            }
            return;
        }
        self.last = Some((key.clone(), None));
        let checked = match malformed {
            Some(problem) => Err(Rejection::Malformed(problem)),
            None => {
                let [stable_signature, canary_signature] = &signatures;
                let guests = [
                    configured.as_deref().map(|wasm| Signed {
                        role: "stable",
                        wasm,
                        signature: stable_signature.as_deref(),
                    }),
                    canary.as_ref().map(|(wasm, _)| Signed {
                        role: "canary",
                        wasm,
                        signature: canary_signature.as_deref(),
                    }),
                ];
                let keys = self.config.trusted_keys.as_deref();
                signature_rejection(keys, guests.into_iter().flatten()).map_or(Ok(()), Err)
            }
        };
        if checked.is_ok() && matches!(&key, CandidateKey::Guests { set, .. } if *set == in_force) {
            self.backoff = None;
            self.starting = false;
            self.write_status(cm, None).await;
            return;
        }
        let candidate = match checked {
            Err(rejection) => Err(rejection),
            Ok(()) => self.candidate(stable, canary, pin, restore).await,
        };
        if !matches!(&candidate, Err(r) if r.is_transient()) {
            self.backoff = None;
            self.starting = false;
        }
        match candidate {
            Ok((set, None)) => {
                let digest = set.stable.digest().to_owned();
                let canary = set.canary.as_ref().map(|c| c.policy.digest().to_owned());
                self.guests.activate(set.stable, set.canary);
                self.metrics.guest_swapped();
                self.metrics.guests_active(&self.guests.current());
                info!(%digest, ?canary, "guest restored from the ConfigMap's accepted state");
                let note = match &canary {
                    Some(c) => format!("stable {digest}, canary {c}; restored, accepted before"),
                    None => format!("{digest}; restored, accepted before"),
                };
                self.report(about, EventType::Normal, "GuestRestored", note)
                    .await;
                self.write_status(cm, None).await;
            }
            Err(rejection) if rejection.is_transient() => {
                let message = error_chain(&rejection);
                self.metrics.guest_rejected(rejection.kind());
                let delay = self.backoff.unwrap_or(RETRY_MIN);
                self.backoff = Some((delay * 2).min(RETRY_MAX));
                warn!(reason = rejection.kind(), error = %message, retry_in = ?delay, "guest evaluation failed; retrying, the guests in force stay");
                let note = format!("{message}; retrying in {delay:?}");
                self.report(about, EventType::Warning, "GuestRetrying", note)
                    .await;
                self.last = None;
                self.retry = Some(Retry {
                    cm: cm.cloned(),
                    about: about.cloned(),
                    at: tokio::time::Instant::now() + delay,
                });
            }
            Ok((set, Some(rendered))) => {
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

    /// Loads and checks a candidate set, then, unless it is a `restore` of guests accepted
    /// before, dry-runs it; returns it and how many AppServices the dry run judged (`None`
    /// without one).
    async fn candidate(
        &self,
        stable: Arc<[u8]>,
        canary: Option<(Vec<u8>, String)>,
        pin: Option<String>,
        restore: bool,
    ) -> Result<(Set, Option<usize>), Rejection> {
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
        if restore {
            return Ok((set, None));
        }
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
        let current = self.guests.current();
        let (judged, changed) = validate::dry_run(&current, &set, &apps.items, &levels).await?;
        let judged = server_dry_run::judge(&self.client, &self.metrics, changed, judged).await?;
        Ok((set, Some(judged)))
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

/// Sleeps until `at`; forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Whether `cm`'s status annotations record that the operator accepted exactly the guests of
/// `set` ([`Set::key`]): state `Active`, [`ANNOTATION_GUEST_ACTIVE`] the stable guest's digest
/// and [`ANNOTATION_GUEST_CANARY`] the canary's (neither a canary nor the annotation). Only the
/// operator writes these after a verdict, and `guest push` clears the state.
fn accepted(cm: &ConfigMap, set: &(String, Option<(String, String)>)) -> bool {
    let annotations = cm.annotations();
    let get = |key: &str| annotations.get(key).map(String::as_str);
    let (stable, canary) = set;
    get(ANNOTATION_GUEST_STATE) == Some("Active")
        && get(ANNOTATION_GUEST_ACTIVE) == Some(stable.as_str())
        && get(ANNOTATION_GUEST_CANARY) == canary.as_ref().map(|(digest, _)| digest.as_str())
}

/// A guest taken from the ConfigMap, with the signature found beside it.
struct Signed<'a> {
    /// `stable` or `canary`.
    role: &'static str,
    /// The guest.
    wasm: &'a [u8],
    /// The content of its `.sig` key.
    signature: Option<&'a [u8]>,
}

/// With trusted keys, the rejection of the first of `guests` that is not signed by one of
/// them; without, none.
fn signature_rejection<'a>(
    keys: Option<&trust::TrustedKeys>,
    guests: impl IntoIterator<Item = Signed<'a>>,
) -> Option<Rejection> {
    let keys = keys?;
    guests.into_iter().find_map(|guest| {
        let verified = match guest.signature {
            Some(signature) => keys.verify(guest.wasm, signature).map_err(Some),
            None => Err(None),
        };
        verified.err().map(|source| Rejection::Signature {
            role: guest.role,
            digest: guest::digest(guest.wasm),
            source,
        })
    })
}

/// What is wrong with the shape of guest ConfigMap `cm`, if anything: the guests belong under
/// `binaryData` keys [`GUEST_KEY`] and [`CANARY_KEY`], their signatures under
/// [`GUEST_SIGNATURE_KEY`] and [`CANARY_SIGNATURE_KEY`], and nothing else is expected there or
/// under `data` (a guest under `data`, or a misspelt key, would otherwise be silently ignored
/// and the base guest run instead; a signature without its guest is a leftover). A ConfigMap
/// with no keys at all is well-formed: it holds no guest.
fn malformed(cm: &ConfigMap) -> Option<String> {
    let guests = [GUEST_KEY, CANARY_KEY];
    let signatures = [GUEST_SIGNATURE_KEY, CANARY_SIGNATURE_KEY];
    if let Some(key) = cm.data.iter().flat_map(|d| d.keys()).next() {
        let hint = if guests.contains(&key.as_str()) {
            "; a guest is binary and belongs under binaryData (`app-operator guest push` puts it there)"
        } else if signatures.contains(&key.as_str()) {
            "; a signature belongs under binaryData too (`app-operator guest push --signature` puts it there)"
        } else {
            ""
        };
        return Some(format!("unexpected key `{key}` under data{hint}"));
    }
    let binary = cm.binary_data.as_ref();
    let has = |key: &str| binary.is_some_and(|d| d.contains_key(key));
    if let Some(key) = binary
        .iter()
        .flat_map(|d| d.keys())
        .find(|key| !guests.contains(&key.as_str()) && !signatures.contains(&key.as_str()))
    {
        return Some(format!(
            "unexpected key `{key}` under binaryData; expected `{GUEST_KEY}`, `{CANARY_KEY}` and \
             their signatures `{GUEST_SIGNATURE_KEY}`, `{CANARY_SIGNATURE_KEY}`"
        ));
    }
    guests
        .into_iter()
        .zip(signatures)
        .find(|(guest, signature)| has(signature) && !has(guest))
        .map(|(guest, signature)| format!("signature `{signature}` without its guest `{guest}`"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::{Rejection, Signed, accepted, malformed, signature_rejection, trust};
    use crate::swap::trust::TrustedKeys;

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

    #[test]
    fn signatures_sit_beside_their_guests() {
        let all = [
            "guest.wasm",
            "guest.wasm.sig",
            "canary.wasm",
            "canary.wasm.sig",
        ];
        assert_eq!(malformed(&cm(&[], &all)), None);
        let text = malformed(&cm(&["guest.wasm.sig"], &["guest.wasm"])).expect("text signature");
        assert!(
            text.contains("a signature belongs under binaryData"),
            "{text}"
        );
        let stale = malformed(&cm(&[], &["guest.wasm", "canary.wasm.sig"])).expect("leftover");
        assert_eq!(
            stale,
            "signature `canary.wasm.sig` without its guest `canary.wasm`"
        );
    }

    fn annotated(annotations: &[(&str, &str)]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        cm
    }

    #[test]
    fn only_guests_recorded_as_accepted_are_restored() {
        let (state, active, canary) = (
            "apps.kudevops.io/guest-state",
            "apps.kudevops.io/guest-active",
            "apps.kudevops.io/guest-canary",
        );
        let stable = ("sha256:a".to_owned(), None);
        let with_canary = (
            "sha256:a".to_owned(),
            Some(("sha256:c".to_owned(), "track=canary".to_owned())),
        );
        let cm = annotated(&[(state, "Active"), (active, "sha256:a")]);
        assert!(accepted(&cm, &stable));
        assert!(!accepted(&cm, &with_canary), "an unrecorded canary");
        let cm = annotated(&[
            (state, "Active"),
            (active, "sha256:a"),
            (canary, "sha256:c"),
        ]);
        assert!(accepted(&cm, &with_canary));
        assert!(!accepted(&cm, &stable), "a canary recorded but gone");
        let changed = ("sha256:b".to_owned(), None);
        let cm = annotated(&[(state, "Active"), (active, "sha256:a")]);
        assert!(!accepted(&cm, &changed), "another guest");
        let cm = annotated(&[(state, "Rejected"), (active, "sha256:a")]);
        assert!(!accepted(&cm, &stable), "a rejection");
        assert!(
            !accepted(&annotated(&[(active, "sha256:a")]), &stable),
            "pushed, no verdict"
        );
    }

    #[test]
    fn failures_to_evaluate_are_transient_verdicts_are_not() {
        let unreachable = || kube::Error::Service("connection refused".into());
        assert!(Rejection::List(unreachable()).is_transient());
        assert!(Rejection::Namespaces(unreachable()).is_transient());
        assert!(!Rejection::Malformed("x".into()).is_transient());
        let pin = Rejection::Pin {
            digest: "sha256:a".into(),
            pin: "sha256:b".into(),
        };
        assert!(!pin.is_transient());
        let load = Rejection::Load {
            role: "stable",
            source: crate::guest::Error::Config("x".into()),
        };
        assert!(!load.is_transient());
    }

    /// The fixture keys of `host/tests/fixtures/keys`.
    fn keys() -> TrustedKeys {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys");
        TrustedKeys::load(&[dir.join("trusted.pub.pem")]).expect("the fixture key loads")
    }

    fn signature(wasm: &[u8], key: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys");
        let pem = std::fs::read_to_string(dir.join(key)).expect("the fixture key reads");
        trust::sign(&pem, wasm).expect("it signs").to_file()
    }

    fn signed<'a>(role: &'static str, wasm: &'a [u8], signature: Option<&'a [u8]>) -> Signed<'a> {
        Signed {
            role,
            wasm,
            signature,
        }
    }

    #[test]
    fn with_trusted_keys_every_configured_guest_is_signed() {
        let (stable, canary) = (&b"stable"[..], &b"canary"[..]);
        let good = signature(stable, "trusted.key.pem");
        let good_canary = signature(canary, "trusted.key.pem");
        let keys = keys();
        // No keys: nothing is checked.
        assert!(signature_rejection(None, [signed("stable", stable, None)]).is_none());
        // The base guest (no guest in the ConfigMap) needs no signature.
        assert!(signature_rejection(Some(&keys), []).is_none());
        let both = [
            signed("stable", stable, Some(&good)),
            signed("canary", canary, Some(&good_canary)),
        ];
        assert!(signature_rejection(Some(&keys), both).is_none());

        let unsigned = [
            signed("stable", stable, Some(&good)),
            signed("canary", canary, None),
        ];
        let unsigned = signature_rejection(Some(&keys), unsigned).expect("an unsigned canary");
        assert_eq!(unsigned.kind(), "signature");
        assert_eq!(
            unsigned.to_string(),
            format!(
                "the canary guest {} is not signed, and --guest-trusted-key requires a signature",
                crate::guest::digest(canary)
            )
        );
        let untrusted = signature(stable, "untrusted.key.pem");
        let wrong = signature_rejection(Some(&keys), [signed("stable", stable, Some(&untrusted))])
            .expect("an untrusted key");
        assert_eq!(
            crate::error_chain(&wrong),
            format!(
                "the stable guest {} fails the signature check: the signature does not verify \
                 with any trusted key",
                crate::guest::digest(stable)
            )
        );
        // The signature of another guest.
        let swapped = signature_rejection(Some(&keys), [signed("stable", canary, Some(&good))]);
        assert!(matches!(
            swapped,
            Some(Rejection::Signature { role: "stable", .. })
        ));
    }
}
