//! The host's admission of guest output: whatever a guest returns, only what these rules allow
//! reaches the cluster.
//!
//! It runs inside every [`Policy::render`](super::Policy::render), after the structural checks of
//! `validate`, so the controller, the swap dry run, `render` and `plan` refuse the same output
//! for the same reasons, and a policy author sees a refusal locally before any cluster does:
//! - pod templates meet a Pod Security Standard ([`pod_security`]): the configured level, or the
//!   namespace's `pod-security.kubernetes.io/enforce` level when that is stricter;
//! - Services are of an allowed type (never `ExternalName`), carry no `externalIPs`, and select
//!   the pods of a Deployment the same render emitted;
//! - `serviceAccountName` is unset, `default`, or allowlisted;
//! - a render emits at most [`Config::max_objects`] objects (checked before the bodies are
//!   parsed; `max_output_bytes` bounds their size).

pub mod pod_security;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use self::pod_security::Finding;
pub use self::pod_security::{Level, UnknownLevel};
use super::DesiredObject;
use crate::text::Listed;

/// Namespace label whose level applies when it is stricter than [`Config::pod_security`].
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";

/// Service types never allowed, whatever the configuration: an `ExternalName` Service is a DNS
/// alias to any host, a way to redirect the namespace's traffic.
const FORBIDDEN_SERVICE_TYPES: [&str; 1] = ["ExternalName"];

/// Refusals listed in one message; the rest are counted.
const MAX_LISTED: usize = 5;

/// What a guest's output may contain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The Pod Security Standard every pod template must meet; a namespace label can only make
    /// it stricter.
    pub pod_security: Level,
    /// Service types a guest may emit (`spec.type`; absent means `ClusterIP`).
    pub service_types: Vec<String>,
    /// `serviceAccountName` values a pod template may name, besides leaving it unset or naming
    /// the namespace's `default`.
    pub service_accounts: Vec<String>,
    /// Most objects one render may emit.
    pub max_objects: usize,
}

impl Default for Config {
    /// `baseline`, `ClusterIP` and `NodePort` Services, no extra ServiceAccount, 8 objects.
    fn default() -> Self {
        Self {
            pod_security: Level::Baseline,
            service_types: vec!["ClusterIP".into(), "NodePort".into()],
            service_accounts: Vec::new(),
            max_objects: 8,
        }
    }
}

impl Config {
    /// Why this configuration is unusable, if it is: `ExternalName` allowed, or no object.
    pub fn problem(&self) -> Option<String> {
        if let Some(t) = self
            .service_types
            .iter()
            .find(|t| FORBIDDEN_SERVICE_TYPES.contains(&t.as_str()))
        {
            return Some(format!("Service type {t} can never be allowed"));
        }
        (self.max_objects == 0).then(|| "max_objects must be positive".to_owned())
    }

    /// The level that applies in a namespace whose enforce label says `namespace`.
    pub fn level(&self, namespace: Option<Level>) -> Level {
        namespace.map_or(self.pod_security, |ns| ns.max(self.pod_security))
    }
}

/// The level a namespace's labels enforce: its [`ENFORCE_LABEL`], if set. An unknown value
/// counts as `restricted`, as the Pod Security admission plugin treats it.
pub fn namespace_level(labels: Option<&BTreeMap<String, String>>) -> Option<Level> {
    let value = labels?.get(ENFORCE_LABEL)?;
    Some(value.parse().unwrap_or(Level::Restricted))
}

/// One thing the host refuses in a guest's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `Kind/name` of the offending object, or `output` for the output as a whole.
    pub object: String,
    /// Path of the offending field from the object's root, e.g.
    /// `spec.template.spec.volumes[0].hostPath`; empty for the output as a whole.
    pub path: String,
    /// The rule, a fixed string for metric labels, e.g. `host_path_volumes` or `service_type`.
    pub rule: &'static str,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{} {}: {}", self.object, self.path, self.message)
        }
    }
}

/// Every refusal of one render; never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The level pod templates were held to.
    pub level: Level,
    /// What was refused, in the order of the output.
    pub refusals: Vec<Refusal>,
}

impl Refused {
    /// The distinct rules broken, in order of first appearance.
    pub fn rules(&self) -> Vec<&'static str> {
        let mut rules: Vec<&'static str> = Vec::new();
        for r in &self.refusals {
            if !rules.contains(&r.rule) {
                rules.push(r.rule);
            }
        }
        rules
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let listed = Listed {
            items: &self.refusals,
            max: MAX_LISTED,
        };
        write!(
            f,
            "output refused (pod security level {}): {listed}",
            self.level
        )
    }
}

impl std::error::Error for Refused {}

/// Refuses a render of `count` objects when that is over the cap; called before the bodies are
/// parsed.
pub(super) fn admit_count(config: &Config, level: Level, count: usize) -> Result<(), Refused> {
    if count <= config.max_objects {
        return Ok(());
    }
    Err(Refused {
        level,
        refusals: vec![Refusal {
            object: "output".into(),
            path: String::new(),
            rule: "max_objects",
            message: format!(
                "{count} objects, over the limit of {} per AppService",
                config.max_objects
            ),
        }],
    })
}

/// Checks validated output against the rules at `level`; returns every refusal.
pub(super) fn admit(
    config: &Config,
    level: Level,
    objects: &[DesiredObject],
) -> Result<(), Refused> {
    let mut refusals = Vec::new();
    let pod_labels: Vec<&Map<String, Value>> = objects
        .iter()
        .filter(|o| o.kind == "Deployment")
        .filter_map(|o| {
            o.body
                .pointer("/spec/template/metadata/labels")?
                .as_object()
        })
        .collect();
    for o in objects {
        let mut findings = Vec::new();
        for (template, path) in pod_security::templates(&o.kind, &o.body) {
            findings.extend(pod_security::check_template(level, template, &path));
            findings.extend(service_account(config, template, &path));
        }
        if o.api_version == "v1" && o.kind == "Service" {
            findings.extend(service(config, &o.body, &pod_labels));
        }
        refusals.extend(findings.into_iter().map(|f| Refusal {
            object: format!("{}/{}", o.kind, o.name),
            path: f.path,
            rule: f.rule,
            message: f.message,
        }));
    }
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Refused { level, refusals })
    }
}

/// A pod template's ServiceAccount must be unset, `default` or allowlisted (`serviceAccount` is
/// the deprecated alias the API server still honours).
fn service_account(config: &Config, template: &Value, path: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let Some(spec) = template.get("spec") else {
        return findings;
    };
    for field in ["serviceAccountName", "serviceAccount"] {
        let Some(value) = spec.get(field) else {
            continue;
        };
        let allowed = value.as_str().is_some_and(|name| {
            name.is_empty()
                || name == "default"
                || config.service_accounts.iter().any(|a| a == name)
        });
        if !allowed {
            let allowlist = if config.service_accounts.is_empty() {
                "none is allowlisted".to_owned()
            } else {
                format!("allowed: {}", config.service_accounts.join(", "))
            };
            findings.push(Finding {
                path: join(path, &format!("spec.{field}")),
                rule: "service_account",
                message: format!(
                    "ServiceAccount {value} is not allowed; pods run as the namespace's default ({allowlist})"
                ),
            });
        }
    }
    findings
}

/// A Service's type, external IPs and selector.
fn service(config: &Config, body: &Value, pod_labels: &[&Map<String, Value>]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut refuse = |path: &str, rule, message| {
        findings.push(Finding {
            path: path.to_owned(),
            rule,
            message,
        });
    };
    let spec = body.get("spec");
    let field = |name: &str| spec.and_then(|s| s.get(name));
    let type_ = field("type");
    let allowed = match type_ {
        None => config.service_types.iter().any(|t| t == "ClusterIP"),
        Some(t) => t.as_str().is_some_and(|t| {
            !FORBIDDEN_SERVICE_TYPES.contains(&t) && config.service_types.iter().any(|a| a == t)
        }),
    };
    if !allowed {
        let shown = type_.map_or_else(|| "ClusterIP (the default)".to_owned(), Value::to_string);
        refuse(
            "spec.type",
            "service_type",
            format!(
                "type {shown} is not allowed (allowed: {})",
                config.service_types.join(", ")
            ),
        );
    }
    if let Some(ips) = field("externalIPs").filter(|v| !is_empty(v)) {
        refuse(
            "spec.externalIPs",
            "external_ips",
            format!("externalIPs {ips} are never allowed (CVE-2020-8554)"),
        );
    }
    let selector = field("selector").and_then(Value::as_object);
    let selects_own_pods = selector.is_some_and(|selector| {
        !selector.is_empty()
            && pod_labels
                .iter()
                .any(|labels| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
    });
    if !selects_own_pods {
        let shown = selector.map_or_else(
            || "none".to_owned(),
            |s| Value::Object(s.clone()).to_string(),
        );
        refuse(
            "spec.selector",
            "service_selector",
            format!(
                "selector {shown} does not select the pods of a Deployment this AppService renders; \
                 it must be non-empty and match their template labels"
            ),
        );
    }
    findings
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// `prefix.field`, or `field` at the root.
fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

#[cfg(test)]
mod tests;
