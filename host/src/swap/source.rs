//! The guest ConfigMap as the source of guests: watched, each new content checked (shape,
//! signatures, pins, load, dry run on every live AppService), then put in force or rejected.
//!
//! Without the ConfigMap (never created, or deleted) the base guest runs: the embedded default
//! guest, or the `--guest` file. Deleting the ConfigMap therefore reverts to the base guest,
//! through the same validation, so a running operator behaves as a freshly started one would.
//!
//! At start-up the set last put in force is restored from its [`record`] without a dry run, so a
//! restarted operator, or a new leader, keeps the guests the fleet ran, whatever the ConfigMap
//! holds now (a candidate pushed meanwhile is judged against them). A candidate whose
//! evaluation failed for a transient reason ([`Rejection::is_transient`]) is not rejected but
//! evaluated again, with backoff.
//!
//! With trusted keys ([`Config::trusted_keys`]) every guest taken from the ConfigMap or the
//! record must carry a signature by one of them ([`trust`]), checked before it is loaded; the
//! base guest belongs to the operator's own deployment and is not checked. Pins
//! ([`Config::pins`] and the ConfigMap's annotations) are checked the same way.
//!
//! A guest given by reference (`guest.ref`, `canary.ref`) is fetched ([`oci::Fetcher`]: the
//! on-disk cache, else the registry) and verified before anything else; from there on it is
//! judged exactly as an inline guest. A registry that cannot be reached is a transient failure
//! (the guests in force stay, the candidate is tried again); a refusal, a digest mismatch or an
//! artifact that is not a wasm component is a rejection. The record holds the reference, so a
//! restart restores a pulled guest from the cache without the registry; one that is in no cache
//! and cannot be pulled is waited for ([`Source::sync_once`]), never replaced by the base guest.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::contents::{self, Contents, Pulled};
use super::note_recorder::NoteRecorder;
use super::pin::{Origin, Pins};
use super::rejection::{self, Rejection};
use super::{Canary, Guests, InForce, InForceKey, Role, dry_run, judge, record, selector, trust};
use crate::backoff::WatchBackoff;
use crate::consts::{
    ANNOTATION_GUEST_ACTIVE, ANNOTATION_GUEST_CANARY, ANNOTATION_GUEST_MESSAGE,
    ANNOTATION_GUEST_STATE,
};
use crate::crd::AppService;
use crate::metrics::Metrics;
use crate::oci::fetch::Origin as FetchOrigin;
use crate::readiness::Readiness;
use crate::{error_chain, guest, namespaces, oci};

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
    /// The digests the guests must have (`--guest-pin`, `--canary-pin`), on top of the
    /// ConfigMap's own pins.
    pub pins: Pins,
}

/// Watches the guest ConfigMap and keeps [`Guests`] in step with it.
pub struct Source {
    client: Client,
    runtime: guest::Runtime,
    base: Arc<[u8]>,
    guests: Guests,
    metrics: Metrics,
    /// Publishes the Events about the guest ConfigMap.
    events: NoteRecorder,
    config: Config,
    /// The last candidate evaluated and why it was rejected, so that an unchanged one is not
    /// tried again.
    last: Option<(CandidateKey, Option<String>)>,
    /// A candidate to evaluate again after a transient failure, and when.
    retry: Option<Retry>,
    /// The delay before the next retry; `None` after a verdict.
    backoff: Option<Duration>,
    /// The set the record holds, as far as this process knows; `None`: unknown.
    recorded: Option<InForceKey>,
    /// Fetches the guests given by reference.
    fetcher: Arc<oci::Fetcher>,
    /// The components last fetched, and those of the set in force, by reference: a ConfigMap
    /// event that names them again does not read them again.
    pulled: Pulled,
    /// The components of the set in force pulled by reference.
    in_force: Pulled,
    /// Where the guests of the last [`Source::read`] came from, for Events.
    fetched_from: Vec<(Role, FetchOrigin)>,
    /// Told while the guests in force cannot be restored, and where the guests came from.
    readiness: Option<Arc<Readiness>>,
}

/// What [`Source::restore`] did.
enum Restored {
    /// The recorded set is in force, or there was none to restore, or it was refused and the
    /// base guest is in force.
    Done,
    /// A recorded guest could not be fetched, and why: nothing was put in force.
    Unfetched(String),
}

/// The first delay before evaluating a candidate again after a transient failure; it doubles
/// up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_secs(1);

/// The longest delay between two evaluations of a candidate that keep failing transiently.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Attempts at reading the ConfigMap and the record at start-up before giving up.
const STARTUP_ATTEMPTS: u32 = 5;

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
    /// A ConfigMap whose guests by reference could not be fetched, by the error.
    Unfetched(String),
    /// A well-formed one.
    Guests {
        /// The digests of the guests and the canary's selector.
        set: InForceKey,
        /// The ConfigMap's pins.
        pins: Pins,
        /// The signatures of the stable and the canary guests (a new signature of the same
        /// guest is checked again).
        signatures: [Option<Vec<u8>>; 2],
    },
}

impl CandidateKey {
    fn of(contents: &Result<Contents, Rejection>, base: &[u8]) -> Self {
        match contents {
            Err(Rejection::Malformed(problem)) => CandidateKey::Malformed(problem.clone()),
            Err(other) => CandidateKey::Unfetched(error_chain(other)),
            Ok(c) => CandidateKey::Guests {
                set: c.set_key(base),
                pins: c.pins.clone(),
                signatures: c.signatures().map(|s| s.map(<[u8]>::to_vec)),
            },
        }
    }
}

impl Source {
    /// A source whose base guest (no ConfigMap) is `base`.
    pub fn new(
        client: Client,
        runtime: guest::Runtime,
        base: Arc<[u8]>,
        guests: Guests,
        metrics: Metrics,
        reporter: Reporter,
        config: Config,
    ) -> Self {
        Self {
            events: NoteRecorder::new(client.clone(), reporter),
            client,
            runtime,
            base,
            guests,
            metrics,
            config,
            last: None,
            retry: None,
            backoff: None,
            recorded: None,
            fetcher: Arc::new(oci::Fetcher::new(oci::Registry::anonymous(), None)),
            pulled: Pulled::new(),
            in_force: Pulled::new(),
            fetched_from: Vec::new(),
            readiness: None,
        }
    }

    /// Reports to `readiness`: not ready while the guests in force cannot be restored (the
    /// registry down and the on-disk cache empty), and notes on where the guests in force came
    /// from and on a candidate being retried.
    #[must_use]
    pub fn with_readiness(mut self, readiness: Arc<Readiness>) -> Self {
        self.readiness = Some(readiness);
        self
    }

    fn note(&self, topic: &'static str, note: Option<String>) {
        if let Some(readiness) = &self.readiness {
            readiness.set_note(topic, note);
        }
    }

    /// Notes the set now in force and where its guests by reference came from, and clears the
    /// note on a candidate being retried.
    fn note_in_force(&self) {
        let key = self.guests.current().key();
        self.note(
            "guests",
            Some(format!("{}{}", describe(&key), fetched(&self.fetched_from))),
        );
        self.note("candidate", None);
    }

    /// Fetches guests given by reference with `fetcher` (its credentials, CA and cache)
    /// instead of anonymously and without a cache.
    #[must_use]
    pub fn with_fetcher(mut self, fetcher: oci::Fetcher) -> Self {
        self.fetcher = Arc::new(fetcher);
        self
    }

    /// Reads `cm` (the guest ConfigMap or the record), fetching the guests it names by
    /// reference.
    async fn read(&mut self, cm: &ConfigMap) -> Result<Contents, Rejection> {
        let refs = contents::references(cm).map_err(Rejection::Malformed)?;
        let mut pulled = Pulled::new();
        self.fetched_from.clear();
        for (role, reference) in refs {
            let wasm = match self.pulled.get(&reference) {
                Some(wasm) => wasm.clone(),
                None => {
                    let fetched = self
                        .fetcher
                        .fetch(&reference)
                        .await
                        .map_err(|source| Rejection::Fetch { role, source })?;
                    self.metrics.guest_fetched(match fetched.origin {
                        FetchOrigin::Cache => "cache",
                        FetchOrigin::Registry => "registry",
                    });
                    self.fetched_from.push((role, fetched.origin));
                    fetched.wasm
                }
            };
            pulled.insert(reference, wasm);
        }
        let contents = Contents::parse(cm, &pulled).map_err(Rejection::Malformed)?;
        // NB: keep what the set in force was pulled from too; drop the rest.
        pulled.extend(self.in_force.clone());
        self.pulled = pulled;
        Ok(contents)
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    /// Restores the set of guests last put in force from its record, then reads the ConfigMap
    /// once and evaluates it; call before the controller starts so that it does not begin
    /// with the base guest only to swap a moment later. Reading is tried
    /// [`STARTUP_ATTEMPTS`] times, with backoff, before the error is returned.
    ///
    /// NB: a recorded guest that cannot be fetched (the registry down, the on-disk cache empty
    /// or gone with its Pod) is waited for, with backoff and the readiness saying why, rather
    /// than replaced by the base guest: the fleet would be rendered again by a guest nobody put
    /// in force. Deleting the record ends the wait.
    pub async fn sync_once(&mut self) -> Result<(), kube::Error> {
        let mut wait = RETRY_MIN;
        let cm = loop {
            let (cm, recorded) = self.read_startup().await?;
            match self.restore(recorded, cm.as_ref()).await {
                Restored::Done => break cm,
                Restored::Unfetched(why) => {
                    let why = format!(
                        "waiting for the guests in force: {why}; trying again in {} s",
                        wait.as_secs()
                    );
                    if let Some(readiness) = &self.readiness {
                        readiness.set_waiting(Some(why));
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(RETRY_MAX);
                }
            }
        };
        if let Some(readiness) = &self.readiness {
            readiness.set_waiting(None);
        }
        self.evaluate(cm.as_ref()).await;
        Ok(())
    }

    /// Reads the ConfigMap and the record of the set in force, [`STARTUP_ATTEMPTS`] times with
    /// backoff.
    async fn read_startup(
        &mut self,
    ) -> Result<(Option<ConfigMap>, Option<ConfigMap>), kube::Error> {
        let mut delay = RETRY_MIN;
        let mut attempt = 1;
        loop {
            let read = async {
                let cm = self.api().get_opt(&self.config.name).await?;
                let name = record::name(&self.config.name);
                let recorded = record::read(&self.api(), &name).await?;
                Ok::<_, kube::Error>((cm, recorded))
            };
            match read.await {
                Ok(read) => return Ok(read),
                Err(err) if attempt < STARTUP_ATTEMPTS => {
                    warn!(error = %error_chain(&err), attempt, retry_in = ?delay, "failed to read the guest ConfigMap and its record; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Puts the recorded set in force, checked against the trusted keys and the `run` pins but
    /// not dry-run; reports on `about`, the guest ConfigMap. A recorded guest that cannot be
    /// fetched puts nothing in force.
    async fn restore(
        &mut self,
        recorded: Option<ConfigMap>,
        about: Option<&ConfigMap>,
    ) -> Restored {
        let name = record::name(&self.config.name);
        let contents = match recorded {
            None => {
                self.recorded = Some(Contents::default().set_key(&self.base));
                return Restored::Done;
            }
            Some(cm) => self.read(&cm).await,
        };
        let contents = match contents {
            Err(Rejection::Malformed(problem)) => {
                warn!(record = %name, %problem, "the record of the guests in force is malformed; it is not restored");
                return Restored::Done;
            }
            Err(rejection @ Rejection::Fetch { .. }) => {
                let message = error_chain(&rejection);
                self.metrics.guest_rejected(rejection.kind());
                warn!(record = %name, reason = rejection.kind(), error = %message, "a guest of the record could not be fetched; waiting for it, nothing in force changes");
                let note = format!(
                    "the guests recorded in {name} could not be fetched: {message}; the \
                     controller waits for them (delete {name} to start on the base guest)"
                );
                self.report(about, EventType::Warning, "GuestRestoreWaiting", note)
                    .await;
                return Restored::Unfetched(message);
            }
            other => other,
        };
        let key = contents.as_ref().ok().map(|c| c.set_key(&self.base));
        if let (Ok(contents), Some(key)) = (&contents, &key)
            && *key == self.guests.current().key()
        {
            self.in_force = contents.pulled();
            self.recorded = Some(key.clone());
            self.note_in_force();
            return Restored::Done;
        }
        let restored = match contents.and_then(|c| self.check(&c, false).map(|()| c)) {
            Ok(contents) => self.load_set(&contents).await.map(|set| (set, contents)),
            Err(rejection) => Err(rejection),
        };
        match restored {
            Ok((set, contents)) => {
                let key = set.key();
                self.guests.activate(set.stable, set.canary);
                self.in_force = contents.pulled();
                self.recorded = Some(key.clone());
                self.metrics.guest_swapped();
                self.metrics
                    .guests_active(&key.stable, key.canary.as_ref().map(|c| c.digest.as_str()));
                info!(stable = %key.stable, canary = ?key.canary.as_ref().map(|c| &c.digest), fetched = ?self.fetched_from, "guests restored from the record of the guests in force");
                let note = format!(
                    "{}; restored from {name}{}",
                    describe(&key),
                    fetched(&self.fetched_from)
                );
                self.report(about, EventType::Normal, "GuestRestored", note)
                    .await;
                self.note_in_force();
            }
            Err(rejection) => {
                let message = error_chain(&rejection);
                self.metrics.guest_rejected(rejection.kind());
                warn!(record = %name, reason = rejection.kind(), error = %message, "the recorded guests were not restored; the base guest is in force");
                let note = format!(
                    "the guests recorded in {name} were not restored: {message}; the base guest \
                     is in force until a candidate passes the dry run"
                );
                self.report(about, EventType::Warning, "GuestRestoreFailed", note)
                    .await;
                self.note_in_force();
            }
        }
        Restored::Done
    }

    /// Watches the ConfigMap until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let fields = format!("metadata.name={}", self.config.name);
        let stream = watcher(self.api(), watcher::Config::default().fields(&fields))
            .backoff(WatchBackoff::default());
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
        let contents = match cm {
            None => Ok(Contents::default()),
            Some(cm) => self.read(cm).await,
        };
        let key = CandidateKey::of(&contents, &self.base);
        // NB: a guest that could not be fetched is fetched again when pushed again (`guest
        // push` clears the state annotation), after the credentials were fixed, say.
        let pushed_again =
            cm.is_some_and(|c| !c.annotations().contains_key(ANNOTATION_GUEST_STATE));
        if let Some((last, rejected)) = &self.last
            && *last == key
            && !(pushed_again && matches!(key, CandidateKey::Unfetched(_)))
        {
            self.backoff = None;
            // NB: `guest push` clears the state annotation; answer it again.
            if cm.is_some_and(|c| !c.annotations().contains_key(ANNOTATION_GUEST_STATE)) {
                self.write_status(cm, rejected.clone()).await;
            }
            return;
        }
        self.last = Some((key.clone(), None));
        let checked = contents.and_then(|c| self.check(&c, true).map(|()| c));
        if let (Ok(contents), CandidateKey::Guests { set, .. }) = (&checked, &key)
            && *set == self.guests.current().key()
        {
            self.backoff = None;
            self.in_force = contents.pulled();
            self.note("candidate", None);
            self.write_status(cm, None).await;
            self.record(contents).await;
            return;
        }
        let candidate = match checked {
            Err(rejection) => Err(rejection),
            Ok(contents) => self.candidate(&contents).await.map(|j| (j, contents)),
        };
        match candidate {
            Ok(((set, judged), contents)) => {
                self.backoff = None;
                let key = set.key();
                self.guests.activate(set.stable, set.canary);
                self.in_force = contents.pulled();
                self.metrics.guest_swapped();
                self.metrics
                    .guests_active(&key.stable, key.canary.as_ref().map(|c| c.digest.as_str()));
                info!(stable = %key.stable, canary = ?key.canary.as_ref().map(|c| &c.digest), judged, fetched = ?self.fetched_from, "guest activated");
                let note = format!(
                    "{}; dry run passed on {judged} AppServices{}",
                    describe(&key),
                    fetched(&self.fetched_from)
                );
                self.report(about, EventType::Normal, "GuestActivated", note)
                    .await;
                self.note_in_force();
                self.write_status(cm, None).await;
                self.record(&contents).await;
            }
            Err(rejection) if rejection.is_transient() => {
                let message = error_chain(&rejection);
                self.metrics.guest_rejected(rejection.kind());
                let delay = self.backoff.unwrap_or(RETRY_MIN);
                self.backoff = Some((delay * 2).min(RETRY_MAX));
                warn!(reason = rejection.kind(), error = %message, retry_in = ?delay, "guest evaluation failed; retrying, the guests in force stay");
                let note = format!("{message}; retrying in {delay:?}");
                self.note(
                    "candidate",
                    Some(format!("{note}; the guests in force stay")),
                );
                self.report(about, EventType::Warning, "GuestRetrying", note)
                    .await;
                self.last = None;
                self.retry = Some(Retry {
                    cm: cm.cloned(),
                    about: about.cloned(),
                    at: tokio::time::Instant::now() + delay,
                });
            }
            Err(rejection) => {
                self.backoff = None;
                let message = error_chain(&rejection);
                self.metrics.guest_rejected(rejection.kind());
                warn!(reason = rejection.kind(), error = %message, "guest rejected; the last good guest stays in force");
                self.note("candidate", None);
                self.report(about, EventType::Warning, "GuestRejected", message.clone())
                    .await;
                self.last = Some((key, Some(message.clone())));
                self.write_status(cm, Some(message)).await;
            }
        }
    }

    /// Signatures and pins of `contents`: the `run` pins, and its own when `own_pins` (a
    /// record's pins are not its own: they were checked when it was put in force).
    fn check(&self, contents: &Contents, own_pins: bool) -> Result<(), Rejection> {
        let mut pins = vec![(&self.config.pins, Origin::Flags)];
        if own_pins {
            pins.push((&contents.pins, Origin::ConfigMap));
        }
        rejection::check(contents, self.config.trusted_keys.as_deref(), &pins)
    }

    /// Loads the set `contents` makes, the base guest as its stable guest when it has none.
    async fn load_set(&self, contents: &Contents) -> Result<InForce, Rejection> {
        let stable = contents.stable.as_ref().map_or(&self.base, |g| &g.wasm);
        let stable = self.load(stable.clone(), Role::Stable).await?;
        let canary = match &contents.canary {
            None => None,
            Some(c) => Some(Canary {
                selector: selector::parse(&c.selector)?,
                policy: self.load(c.guest.wasm.clone(), Role::Canary).await?,
                selector_text: c.selector.clone(),
            }),
        };
        Ok(InForce {
            stable,
            canary,
            previous: None,
        })
    }

    /// Loads the set `contents` makes and dry-runs it; returns it and how many AppServices the
    /// dry run judged.
    async fn candidate(&self, contents: &Contents) -> Result<(InForce, usize), Rejection> {
        let set = self.load_set(contents).await?;
        let apps: Api<AppService> =
            crate::scope::api(&self.client, self.config.apps_namespace.as_deref());
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
        let (judged, changed) = dry_run::run(&current, &set, &apps.items, &levels).await?;
        let judged = judge::judge(&self.client, &self.metrics, changed, judged).await?;
        Ok((set, judged))
    }

    async fn load(&self, wasm: Arc<[u8]>, role: Role) -> Result<guest::Policy, Rejection> {
        self.runtime
            .load(wasm)
            .await
            .map_err(|source| Rejection::Load { role, source })
    }

    /// Records `contents`, the set now in force, unless the record holds it already. A failure
    /// is logged: the set stays in force, and a new process would judge it against the
    /// previous record.
    async fn record(&mut self, contents: &Contents) {
        let key = contents.set_key(&self.base);
        if self.recorded.as_ref() == Some(&key) {
            return;
        }
        let name = record::name(&self.config.name);
        match record::write(&self.api(), &name, contents).await {
            Ok(()) => self.recorded = Some(key),
            Err(err) => {
                warn!(record = %name, error = %error_chain(&err), "failed to record the guests in force");
            }
        }
    }

    /// Publishes an Event about the ConfigMap.
    async fn report(
        &mut self,
        cm: Option<&ConfigMap>,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let Some(cm) = cm else {
            return;
        };
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(crate::text::truncate(note, 1000)),
            action: "Swap".into(),
            secondary: None,
        };
        if let Err(err) = self.events.publish(&event, &cm.object_ref(&())).await {
            warn!(error = %err, reason, "failed to publish an event");
        }
    }

    /// Writes the status annotations on the ConfigMap: the guests in force and, after a
    /// rejection, why. Does nothing without a ConfigMap.
    async fn write_status(&self, cm: Option<&ConfigMap>, rejected: Option<String>) {
        let Some(cm) = cm else {
            return;
        };
        let key = self.guests.current().key();
        let state = if rejected.is_some() {
            "Rejected"
        } else {
            "Active"
        };
        let annotations = BTreeMap::from([
            (ANNOTATION_GUEST_STATE, Some(state.to_owned())),
            (ANNOTATION_GUEST_ACTIVE, Some(key.stable)),
            (ANNOTATION_GUEST_CANARY, key.canary.map(|c| c.digest)),
            (ANNOTATION_GUEST_MESSAGE, rejected),
        ]);
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

/// `stable <digest>, canary <digest>`, or the stable digest alone, for Events.
fn describe(key: &InForceKey) -> String {
    match &key.canary {
        Some(c) => format!("stable {}, canary {}", key.stable, c.digest),
        None => key.stable.clone(),
    }
}

/// `; the stable guest pulled from the registry, ...` for Events: where the guests given by
/// reference came from, if any was read.
fn fetched(from: &[(Role, FetchOrigin)]) -> String {
    from.iter()
        .map(|(role, origin)| match origin {
            FetchOrigin::Cache => format!("; the {role} guest read from the on-disk cache"),
            FetchOrigin::Registry => format!("; the {role} guest pulled from the registry"),
        })
        .collect()
}

/// Sleeps until `at`; forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
