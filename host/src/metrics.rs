//! Prometheus metrics of the operator, in one registry prefixed `app_operator`.
//!
//! Labels are fixed strings (an error kind, the guest digest), never object names, so the number
//! of series stays bounded however many AppServices exist.

pub mod resource;

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Prefix of every metric name.
pub const PREFIX: &str = "app_operator";

/// A label set holding one fixed-string error kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// A fixed identifier such as `guest_trap` or `apply`.
    pub kind: &'static str,
}

/// A label set holding where a guest was read from: `cache` or `registry`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OriginLabel {
    /// `cache` or `registry`.
    pub origin: &'static str,
}

/// A label set holding the output policy rule a guest's output broke.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabel {
    /// A fixed rule name such as `host_path_volumes` or `service_type`.
    pub rule: &'static str,
}

/// A label set holding an HTTP method and the resource the request is about.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabel {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE` or `OTHER`.
    pub method: &'static str,
    /// `deployments`, `services`, `appservices`, `appservices/status`, `events`, `leases`,
    /// `configmaps`, `namespaces`, `secrets` or `other` ([`resource::of`]).
    pub resource: &'static str,
}

/// A label set naming a guest by digest and role.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestLabel {
    /// `sha256:<hex>` of the guest.
    pub digest: String,
    /// `stable` or `canary`.
    pub role: &'static str,
}

/// The operator's metrics. Cheap to clone: every metric is a shared handle.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Reconciliations started.
    pub reconciles: Counter,
    /// Failed reconciliations, by error kind.
    pub reconcile_errors: Family<KindLabel, Counter>,
    /// Wall time of one reconciliation, in seconds.
    pub reconcile_duration: Histogram,
    /// Wall time of one guest call, in seconds.
    pub guest_call_duration: Histogram,
    /// Failed guest calls, by error kind.
    pub guest_errors: Family<KindLabel, Counter>,
    /// 1 for each guest in force, by digest and role.
    pub guest_info: Family<GuestLabel, Gauge>,
    /// Guest sets put in force after validation.
    pub guest_swaps: Counter,
    /// Candidate guests rejected, by reason.
    pub guest_rejections: Family<KindLabel, Counter>,
    /// Guests given by reference read, by origin (`cache` or `registry`).
    pub guest_fetches: Family<OriginLabel, Counter>,
    /// Reconciles that fell back to the last good guest.
    pub guest_rollbacks: Counter,
    /// Children of candidate guests sent to the API server as a server-side dry run.
    pub guest_dry_run_applies: Counter,
    /// Requests sent to the Kubernetes API server, by method (watches are GETs) and resource.
    pub kube_requests: Family<RequestLabel, Counter>,
    /// Guest outputs the host refused, by the rule broken (one count per rule per render).
    pub output_refusals: Family<RuleLabel, Counter>,
    /// Child watch events dropped as echoes of the operator's own applies (no reconcile).
    pub child_echoes_skipped: Counter,
    /// Child watch updates that changed nothing a reconcile reads (no reconcile).
    pub child_events_unchanged: Counter,
    /// Reconciles that called no guest: the AppService's guest input, guest and children were
    /// as last rendered.
    pub renders_skipped: Counter,
    /// 1 while the API server answers the operator's requests, 0 while it does not.
    pub api_reachable: Gauge,
    /// Requests that got no answer (or a 502/503/504), by kind: `transport`, `timeout`,
    /// `unavailable`.
    pub api_failures: Family<KindLabel, Counter>,
    /// Errors of the watch streams, by watch (`appservices`, `deployments`, ...).
    pub watch_errors: Family<KindLabel, Counter>,
    /// Objects the watch streams delivered (added, changed or deleted; a list counts each
    /// object it returned), by watch.
    pub watch_events: Family<KindLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            reconciles: Counter::default(),
            reconcile_errors: Family::default(),
            // 0.5 ms .. ~64 s, fine enough for p50/p99 estimates
            reconcile_duration: Histogram::new(exponential_buckets(0.0005, 1.5, 30)),
            // 5 µs .. ~640 ms
            guest_call_duration: Histogram::new(exponential_buckets(0.000_005, 1.5, 30)),
            guest_errors: Family::default(),
            guest_info: Family::default(),
            guest_swaps: Counter::default(),
            guest_rejections: Family::default(),
            guest_fetches: Family::default(),
            guest_rollbacks: Counter::default(),
            guest_dry_run_applies: Counter::default(),
            kube_requests: Family::default(),
            output_refusals: Family::default(),
            child_echoes_skipped: Counter::default(),
            child_events_unchanged: Counter::default(),
            renders_skipped: Counter::default(),
            api_reachable: Gauge::default(),
            api_failures: Family::default(),
            watch_errors: Family::default(),
            watch_events: Family::default(),
        }
    }
}

impl Metrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "reconciles",
            "Reconciliations started",
            m.reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciliations by error kind",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one reconciliation",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "guest_call_duration_seconds",
            "Duration of one guest call, sandbox set-up included",
            m.guest_call_duration.clone(),
        );
        registry.register(
            "guest_errors",
            "Failed guest calls by error kind",
            m.guest_errors.clone(),
        );
        registry.register(
            "guest_info",
            "The guests in force, by digest and role",
            m.guest_info.clone(),
        );
        registry.register(
            "guest_swaps",
            "Guest sets put in force after validation",
            m.guest_swaps.clone(),
        );
        registry.register(
            "guest_rejections",
            "Candidate guests rejected, by reason",
            m.guest_rejections.clone(),
        );
        registry.register(
            "guest_fetches",
            "Guests given by reference read, by origin (the on-disk cache or the registry)",
            m.guest_fetches.clone(),
        );
        registry.register(
            "guest_rollbacks",
            "Reconciles that fell back to the last good guest",
            m.guest_rollbacks.clone(),
        );
        registry.register(
            "child_echoes_skipped",
            "Child watch events dropped as echoes of the operator's own applies",
            m.child_echoes_skipped.clone(),
        );
        registry.register(
            "child_events_unchanged",
            "Child watch updates that changed nothing a reconcile reads",
            m.child_events_unchanged.clone(),
        );
        registry.register(
            "renders_skipped",
            "Reconciles that called no guest, the AppService's guest input, guest and children \
             being as last rendered",
            m.renders_skipped.clone(),
        );
        registry.register(
            "guest_dry_run_applies",
            "Children of candidate guests sent to the API server as a server-side dry run",
            m.guest_dry_run_applies.clone(),
        );
        registry.register(
            "kube_requests",
            "Requests sent to the Kubernetes API server, by method and resource",
            m.kube_requests.clone(),
        );
        registry.register(
            "output_refusals",
            "Guest outputs refused by the output policy, by rule",
            m.output_refusals.clone(),
        );
        registry.register(
            "api_reachable",
            "1 while the API server answers the operator's requests",
            m.api_reachable.clone(),
        );
        registry.register(
            "api_failures",
            "Requests to the API server that got no answer, by kind",
            m.api_failures.clone(),
        );
        registry.register(
            "watch_errors",
            "Errors of the watch streams, by watch",
            m.watch_errors.clone(),
        );
        registry.register(
            "watch_events",
            "Objects the watch streams delivered, by watch",
            m.watch_events.clone(),
        );
        m
    }

    /// Counts a reconciliation and returns a timer that records its duration when dropped.
    pub fn reconcile_started(&self) -> Timer {
        self.reconciles.inc();
        Timer::new(self.reconcile_duration.clone())
    }

    /// Counts a failed reconciliation.
    pub fn reconcile_failed(&self, kind: &'static str) {
        self.reconcile_errors
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    /// Returns a timer for one guest call.
    pub fn guest_call(&self) -> Timer {
        Timer::new(self.guest_call_duration.clone())
    }

    /// Counts a failed guest call.
    pub fn guest_failed(&self, kind: &'static str) {
        self.guest_errors.get_or_create(&KindLabel { kind }).inc();
    }

    /// Counts a request to the Kubernetes API server: its method and the resource its `path`
    /// names.
    pub fn kube_request(&self, method: &http::Method, path: &str) {
        let method = match *method {
            http::Method::GET => "GET",
            http::Method::POST => "POST",
            http::Method::PUT => "PUT",
            http::Method::PATCH => "PATCH",
            http::Method::DELETE => "DELETE",
            _ => "OTHER",
        };
        self.kube_requests
            .get_or_create(&RequestLabel {
                method,
                resource: resource::of(path),
            })
            .inc();
    }

    /// Records the guests in force, by digest: the stable guest and the canary, if any.
    pub fn guests_active(&self, stable: &str, canary: Option<&str>) {
        self.guest_info.clear();
        self.set_guest(stable, "stable");
        if let Some(canary) = canary {
            self.set_guest(canary, "canary");
        }
    }

    fn set_guest(&self, digest: &str, role: &'static str) {
        let label = GuestLabel {
            digest: digest.to_owned(),
            role,
        };
        self.guest_info.get_or_create(&label).set(1);
    }

    /// Counts a guest set put in force.
    pub fn guest_swapped(&self) {
        self.guest_swaps.inc();
    }

    /// Counts a rejected candidate.
    pub fn guest_rejected(&self, kind: &'static str) {
        self.guest_rejections
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    /// Counts a guest given by reference read from `origin` (`cache` or `registry`).
    pub fn guest_fetched(&self, origin: &'static str) {
        self.guest_fetches
            .get_or_create(&OriginLabel { origin })
            .inc();
    }

    /// Counts a refused guest output once per rule it broke.
    pub fn output_refused(&self, rules: &[&'static str]) {
        for &rule in rules {
            self.output_refusals
                .get_or_create(&RuleLabel { rule })
                .inc();
        }
    }

    /// Counts a reconcile that fell back to the last good guest.
    pub fn guest_rolled_back(&self) {
        self.guest_rollbacks.inc();
    }

    /// Counts a child watch event dropped as the echo of the operator's own apply.
    pub fn child_echo_skipped(&self) {
        self.child_echoes_skipped.inc();
    }

    /// Counts a child watch update dropped because nothing a reconcile reads changed.
    pub fn child_event_unchanged(&self) {
        self.child_events_unchanged.inc();
    }

    /// Counts a reconcile that called no guest ([`Metrics::renders_skipped`]).
    pub fn render_skipped(&self) {
        self.renders_skipped.inc();
    }

    /// Records whether the API server answers.
    pub fn api_reachable(&self, reachable: bool) {
        self.api_reachable.set(i64::from(reachable));
    }

    /// Counts a request to the API server that got no answer.
    pub fn api_failure(&self, kind: &'static str) {
        self.api_failures.get_or_create(&KindLabel { kind }).inc();
    }

    /// Counts an error of watch `watch`'s stream.
    pub fn watch_error(&self, watch: &'static str) {
        self.watch_errors
            .get_or_create(&KindLabel { kind: watch })
            .inc();
    }

    /// The counter of the objects watch `watch` delivers ([`Metrics::watch_events`]), to keep
    /// rather than look up per event.
    pub fn watch_events(&self, watch: &'static str) -> Counter {
        self.watch_events
            .get_or_create(&KindLabel { kind: watch })
            .clone()
    }
}

/// Records the time since its creation into a histogram when dropped.
pub struct Timer {
    start: Instant,
    histogram: Histogram,
}

impl Timer {
    fn new(histogram: Histogram) -> Self {
        Self {
            start: Instant::now(),
            histogram,
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

/// The registry all metrics go to, prefixed with [`PREFIX`].
pub fn registry() -> Registry {
    Registry::with_prefix(PREFIX)
}

/// Renders the registry in the OpenMetrics text format.
pub fn encode(registry: &Arc<Registry>) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)
        .expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_prefixed_and_labelled_by_kind() {
        let mut registry = registry();
        let metrics = Metrics::register(&mut registry);
        drop(metrics.reconcile_started());
        metrics.reconcile_failed("apply");
        metrics.guest_failed("guest_trap");
        metrics.guests_active("sha256:abc", None);
        metrics.kube_request(
            &http::Method::PATCH,
            "/apis/apps/v1/namespaces/ns/deployments/web",
        );
        metrics.output_refused(&["privileged", "service_type"]);
        metrics.watch_events("deployments").inc();
        let text = encode(&Arc::new(registry));
        assert!(text.contains("app_operator_reconciles_total 1"), "{text}");
        assert!(text.contains(r#"app_operator_reconcile_errors_total{kind="apply"} 1"#));
        assert!(text.contains(r#"app_operator_guest_errors_total{kind="guest_trap"} 1"#));
        assert!(text.contains(r#"app_operator_guest_info{digest="sha256:abc",role="stable"} 1"#));
        assert!(text.contains("app_operator_reconcile_duration_seconds_count 1"));
        assert!(text.contains(
            r#"app_operator_kube_requests_total{method="PATCH",resource="deployments"} 1"#
        ));
        assert!(text.contains(r#"app_operator_output_refusals_total{rule="privileged"} 1"#));
        assert!(text.contains(r#"app_operator_watch_events_total{kind="deployments"} 1"#));
    }
}
