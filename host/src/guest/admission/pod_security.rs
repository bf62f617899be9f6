//! Pod Security Standards (privileged, baseline, restricted) checks of pod templates, on raw JSON.
//!
//! The checks are a port of the Kubernetes v1.37 pod-security-admission policy. They walk the
//! `serde_json::Value` directly and allocate only to build a [`Finding`].
//!
//! Findings come in the order of [`RULES`]; within one rule, in walk order: pod-level fields,
//! then `spec.volumes`, then `initContainers`, `containers` and `ephemeralContainers` (the order of
//! upstream `visitContainers`), then template annotations sorted by key, and last the pod-level
//! finding for a restricted requirement that neither the pod nor a container meets.

// Upstream followed: github.com/kubernetes/pod-security-admission at 8f84a87c7f61 (2026-07-01),
// whose policy/ is identical to tag v0.37.0-alpha.2 (Kubernetes v1.37). The newest VersionedCheck
// of:
//   check_windowsHostProcess.go (1.0), check_hostNamespaces.go (1.0), check_privileged.go (1.0),
//   check_capabilities_baseline.go (1.0), check_hostPathVolumes.go (1.0), check_hostPorts.go (1.0),
//   check_hostProbesAndhostLifecycle.go (1.34), check_appArmorProfile.go (1.0),
//   check_seLinuxOptions.go (1.31), check_procMount_baseline.go (1.35),
//   check_procMount_restricted.go (1.35), check_seccompProfile_baseline.go (1.19),
//   check_sysctls.go (1.37), check_restrictedVolumes.go (1.0, with `image`),
//   check_allowPrivilegeEscalation.go (1.25), check_runAsNonRoot.go (1.35),
//   check_runAsUser.go (1.35), check_seccompProfile_restricted.go (1.25),
//   check_capabilities_restricted.go (1.25); plus visitor.go, helpers.go
//   (relaxPolicyForUserNamespacePod) and admission/admission.go (which kinds hold templates).
// Restricted overrides as upstream: capabilities, seccomp and procMount replace their baseline
// variants, and restrictedVolumes replaces hostPathVolumes (a hostPath volume is still reported as
// `host_path_volumes`, so one metric label covers it at both levels).

use std::fmt::{self, Write as _};
use std::str::FromStr;

use serde_json::Value;

/// A Pod Security Standards level, ordered from least to most strict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Level {
    /// No restrictions.
    Privileged,
    /// Prevents known privilege escalations; the default pod configuration passes.
    #[default]
    Baseline,
    /// Current pod hardening best practice; includes every baseline check.
    Restricted,
}

impl Level {
    /// `privileged`, `baseline` or `restricted`, as in the namespace label
    /// `pod-security.kubernetes.io/enforce`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Privileged => "privileged",
            Self::Baseline => "baseline",
            Self::Restricted => "restricted",
        }
    }
}

impl FromStr for Level {
    type Err = UnknownLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "privileged" => Ok(Self::Privileged),
            "baseline" => Ok(Self::Baseline),
            "restricted" => Ok(Self::Restricted),
            _ => Err(UnknownLevel(s.to_owned())),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Level`] from anything but `privileged`, `baseline` or `restricted`;
/// holds the rejected input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownLevel(pub String);

impl fmt::Display for UnknownLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown Pod Security level `{}`; expected privileged, baseline or restricted",
            self.0
        )
    }
}

impl std::error::Error for UnknownLevel {}

/// One field of a pod template that the level forbids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The exact path of the offending field, from the object's root, e.g.
    /// `spec.template.spec.volumes[0].hostPath` or
    /// `spec.template.metadata.annotations["container.apparmor.security.beta.kubernetes.io/app"]`.
    /// For a required field that is missing, the path of the field that must be set; for
    /// `runAsNonRoot` and `seccompProfile`, which may be set once for the whole pod, that is the
    /// pod-level field (`spec.securityContext.runAsNonRoot`,
    /// `spec.securityContext.seccompProfile.type`).
    pub path: String,
    /// The upstream check's name in snake_case, one of [`RULES`].
    pub rule: &'static str,
    /// What is wrong and what is allowed, one lower-case sentence naming the level.
    pub message: String,
}

/// Every [`Finding::rule`], in the order findings are reported. `host_probes` is upstream's
/// `hostProbesAndHostLifecycle` (baseline since v1.34).
pub const RULES: [&str; 16] = [
    "host_process",
    "host_namespaces",
    "privileged",
    "capabilities",
    "host_path_volumes",
    "host_ports",
    "host_probes",
    "app_armor",
    "selinux",
    "proc_mount",
    "seccomp",
    "sysctls",
    "restricted_volumes",
    "allow_privilege_escalation",
    "run_as_non_root",
    "run_as_user",
];

// NB: the allowed-value lists are ", "-separated strings, so that messages quote them as they are.
const BASELINE_CAPABILITIES: &str = "AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, \
    MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT";
const RESTRICTED_CAPABILITIES: &str = "NET_BIND_SERVICE";
const SAFE_SYSCTLS: &str = "kernel.shm_rmid_forced, net.ipv4.ip_local_port_range, \
    net.ipv4.tcp_syncookies, net.ipv4.ping_group_range, net.ipv4.ip_unprivileged_port_start, \
    net.ipv4.ip_local_reserved_ports, net.ipv4.tcp_keepalive_time, net.ipv4.tcp_fin_timeout, \
    net.ipv4.tcp_keepalive_intvl, net.ipv4.tcp_keepalive_probes, net.ipv4.tcp_rmem, \
    net.ipv4.tcp_wmem, net.ipv4.tcp_slow_start_after_idle, net.ipv4.tcp_notsent_lowat";
const SELINUX_TYPES: &str = "container_t, container_init_t, container_kvm_t, container_engine_t";
const PROFILE_TYPES: &str = "RuntimeDefault, Localhost";
const ALLOWED_VOLUMES: &str = "configMap, csi, downwardAPI, emptyDir, ephemeral, image, \
    persistentVolumeClaim, projected, secret";
// NB: these, ALLOWED_VOLUMES and `hostPath` are all 30 members of core/v1 VolumeSource. Other keys
// are not volume sources: the API server drops them, and a volume left without a source is
// defaulted to emptyDir, so they are ignored rather than reported.
const RESTRICTED_VOLUMES: &str = "gcePersistentDisk, awsElasticBlockStore, gitRepo, nfs, iscsi, \
    glusterfs, rbd, flexVolume, cinder, cephfs, flocker, fc, azureFile, vsphereVolume, quobyte, \
    azureDisk, photonPersistentDisk, portworxVolume, scaleIO, storageos";

const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The pod templates in an object of `kind`, with their paths: `spec.template` for Deployment,
/// ReplicaSet, StatefulSet, DaemonSet, Job, ReplicationController; `spec.jobTemplate.spec.template`
/// for CronJob; `template` for PodTemplate; the object itself (path "") for Pod; none for other
/// kinds, or when the template is absent or null.
pub fn templates<'a>(kind: &str, body: &'a Value) -> Vec<(&'a Value, String)> {
    let (template, path) = match kind {
        "Pod" => (Some(body), ""),
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController" => (body.pointer("/spec/template"), "spec.template"),
        "CronJob" => (
            body.pointer("/spec/jobTemplate/spec/template"),
            "spec.jobTemplate.spec.template",
        ),
        "PodTemplate" => (body.get("template"), "template"),
        _ => (None, ""),
    };
    template
        .filter(|t| !t.is_null())
        .map(|t| (t, path.to_owned()))
        .into_iter()
        .collect()
}

/// Checks a pod template (a JSON object with optional `metadata` and `spec`, as in a Deployment's
/// `spec.template`) against `level`. `path` is the template's own path from the object root, e.g.
/// `spec.template`; a bare Pod is checked with `check_template(level, pod, "")`.
///
/// Returns every finding in the order described in the module documentation; empty when the
/// template meets the level, and always empty at [`Level::Privileged`]. Never panics. JSON `null`
/// and absent fields are unset; a scalar of the wrong JSON type is reported unless it is the
/// allowed value (`privileged: "yes"` is not `false`); an object or list of the wrong type is unset
/// (the API server rejects such an object anyway).
pub fn check_template(level: Level, template: &Value, path: &str) -> Vec<Finding> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let spec = get(Some(template), "spec");
    let mut ck = Checker {
        level,
        base: path,
        windows: get(get(spec, "os"), "name").and_then(Value::as_str) == Some("windows"),
        user_ns: get(spec, "hostUsers").and_then(Value::as_bool) == Some(false),
        out: Vec::new(),
    };
    let (pod_non_root, pod_seccomp) = ck.pod(spec);
    ck.volumes(spec);
    let (mut missing_non_root, mut missing_seccomp) = (false, false);
    for list in CONTAINER_LISTS {
        let Some(containers) = get(spec, list).and_then(Value::as_array) else {
            continue;
        };
        for (i, container) in containers.iter().enumerate() {
            let (non_root, seccomp) = ck.container(Owner::Container(list, i), container);
            missing_non_root |= non_root == Setting::Unset && pod_non_root != Setting::Good;
            missing_seccomp |= seccomp == Setting::Unset && pod_seccomp != Setting::Good;
        }
    }
    ck.annotations(get(Some(template), "metadata"));
    if level == Level::Restricted {
        // NB: a pod-level value that is set but wrong was reported already, and fixing it fixes
        // every container that inherits it.
        if missing_non_root && pod_non_root == Setting::Unset {
            ck.report(
                "run_as_non_root",
                format_args!("spec.securityContext.runAsNonRoot"),
                format_args!("must be true at restricted, on the pod or on every container"),
            );
        }
        if missing_seccomp && pod_seccomp == Setting::Unset {
            ck.report(
                "seccomp",
                format_args!("spec.securityContext.seccompProfile.type"),
                format_args!(
                    "must be RuntimeDefault or Localhost at restricted, \
                     on the pod or on every container"
                ),
            );
        }
    }
    if ck.out.len() > 1 {
        ck.out
            .sort_by_key(|f| RULES.iter().position(|rule| *rule == f.rule));
    }
    ck.out
}

/// `v[key]`, reading JSON `null` (and a `v` that is not an object) as unset.
fn get<'v>(v: Option<&'v Value>, key: &str) -> Option<&'v Value> {
    v?.get(key).filter(|x| !x.is_null())
}

/// Whether `value` is one of the ", "-separated `list`.
fn listed(list: &str, value: &str) -> bool {
    list.split(", ").any(|item| item == value)
}

/// Whether a field whose only allowed values are unset and `false` holds anything else.
fn not_false(v: Option<&Value>) -> bool {
    v.is_some_and(|v| v.as_bool() != Some(false))
}

/// How a pod or container sets a field that restricted requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Unset,
    Good,
    Bad,
}

/// Whose securityContext a field is in; displays as the path of that object's parent.
#[derive(Clone, Copy)]
enum Owner<'s> {
    Pod,
    Container(&'s str, usize),
}

impl fmt::Display for Owner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pod => f.write_str("spec"),
            Self::Container(list, i) => write!(f, "spec.{list}[{i}]"),
        }
    }
}

/// A JSON value in a message: a non-empty string bare, anything else as JSON.
struct Shown<'v>(Option<&'v Value>);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("unset"),
            Some(Value::String(s)) if !s.is_empty() => f.write_str(s),
            Some(v) => write!(f, "{v}"),
        }
    }
}

struct Checker<'a> {
    level: Level,
    base: &'a str,
    /// `spec.os.name` is `windows`: restricted skips allowPrivilegeEscalation, capabilities and
    /// seccomp.
    windows: bool,
    /// `spec.hostUsers` is `false`: baseline procMount and restricted runAsNonRoot/runAsUser pass.
    user_ns: bool,
    out: Vec<Finding>,
}

impl Checker<'_> {
    fn report(
        &mut self,
        rule: &'static str,
        path: fmt::Arguments<'_>,
        message: fmt::Arguments<'_>,
    ) {
        let mut full = String::with_capacity(self.base.len() + 64);
        if !self.base.is_empty() {
            full.push_str(self.base);
            full.push('.');
        }
        // NB: writing to a String cannot fail.
        let _ = full.write_fmt(path);
        self.out.push(Finding {
            path: full,
            rule,
            message: message.to_string(),
        });
    }

    fn restricted(&self) -> bool {
        self.level == Level::Restricted
    }

    /// Checks the fields of the pod spec itself; returns its runAsNonRoot and seccomp settings.
    fn pod(&mut self, spec: Option<&Value>) -> (Setting, Setting) {
        let lvl = self.level.as_str();
        for field in ["hostNetwork", "hostPID", "hostIPC"] {
            if not_false(get(spec, field)) {
                self.report(
                    "host_namespaces",
                    format_args!("spec.{field}"),
                    format_args!("must be unset or false at {lvl}"),
                );
            }
        }
        let sc = get(spec, "securityContext");
        if let Some(sysctls) = get(sc, "sysctls").and_then(Value::as_array) {
            for (k, sysctl) in sysctls.iter().enumerate() {
                let name = get(Some(sysctl), "name");
                if !name
                    .and_then(Value::as_str)
                    .is_some_and(|n| listed(SAFE_SYSCTLS, n))
                {
                    self.report(
                        "sysctls",
                        format_args!("spec.securityContext.sysctls[{k}].name"),
                        format_args!(
                            "sysctl {} is not allowed at {lvl} (allowed: {SAFE_SYSCTLS})",
                            Shown(name)
                        ),
                    );
                }
            }
        }
        self.security_context(Owner::Pod, sc)
    }

    /// Checks the fields a pod and a container securityContext share; returns the runAsNonRoot and
    /// seccomp settings (`Good` where the level does not require them).
    fn security_context(&mut self, o: Owner<'_>, sc: Option<&Value>) -> (Setting, Setting) {
        let lvl = self.level.as_str();
        if not_false(get(get(sc, "windowsOptions"), "hostProcess")) {
            self.report(
                "host_process",
                format_args!("{o}.securityContext.windowsOptions.hostProcess"),
                format_args!("must be unset or false at {lvl}"),
            );
        }
        if let Some(opts) = get(sc, "seLinuxOptions") {
            let ty = get(Some(opts), "type");
            let allowed = |t: &str| t.is_empty() || listed(SELINUX_TYPES, t);
            if ty.is_some_and(|t| !t.as_str().is_some_and(allowed)) {
                self.report(
                    "selinux",
                    format_args!("{o}.securityContext.seLinuxOptions.type"),
                    format_args!(
                        "selinux type {} is not allowed at {lvl} \
                         (allowed: {SELINUX_TYPES}, empty or unset)",
                        Shown(ty)
                    ),
                );
            }
            for field in ["user", "role"] {
                if get(Some(opts), field).is_some_and(|v| v.as_str() != Some("")) {
                    self.report(
                        "selinux",
                        format_args!("{o}.securityContext.seLinuxOptions.{field}"),
                        format_args!("must be empty or unset at {lvl}"),
                    );
                }
            }
        }
        self.profile("app_armor", o, sc, "appArmorProfile");
        // NB: restricted seccomp overrides baseline seccomp, and skips Windows pods entirely.
        let seccomp = if self.restricted() && self.windows {
            Setting::Good
        } else {
            self.profile("seccomp", o, sc, "seccompProfile")
        };
        if !self.restricted() || self.user_ns {
            return (Setting::Good, seccomp);
        }
        let non_root = match get(sc, "runAsNonRoot") {
            None => Setting::Unset,
            Some(Value::Bool(true)) => Setting::Good,
            Some(_) => {
                self.report(
                    "run_as_non_root",
                    format_args!("{o}.securityContext.runAsNonRoot"),
                    format_args!("must be true at restricted"),
                );
                Setting::Bad
            }
        };
        if get(sc, "runAsUser").is_some_and(|u| u.as_i64().is_none_or(|u| u == 0)) {
            self.report(
                "run_as_user",
                format_args!("{o}.securityContext.runAsUser"),
                format_args!("must not be 0 at restricted"),
            );
        }
        (non_root, seccomp)
    }

    /// Checks that `{o}.securityContext.{field}.type`, if `field` is set, is RuntimeDefault or
    /// Localhost.
    fn profile(
        &mut self,
        rule: &'static str,
        o: Owner<'_>,
        sc: Option<&Value>,
        field: &str,
    ) -> Setting {
        let Some(profile) = get(sc, field) else {
            return Setting::Unset;
        };
        let ty = get(Some(profile), "type");
        if ty
            .and_then(Value::as_str)
            .is_some_and(|t| listed(PROFILE_TYPES, t))
        {
            return Setting::Good;
        }
        let lvl = self.level.as_str();
        self.report(
            rule,
            format_args!("{o}.securityContext.{field}.type"),
            format_args!(
                "{field} type {} is not allowed at {lvl} (allowed: {PROFILE_TYPES})",
                Shown(ty)
            ),
        );
        Setting::Bad
    }

    /// Checks one container; returns its runAsNonRoot and seccomp settings.
    fn container(&mut self, o: Owner<'_>, container: &Value) -> (Setting, Setting) {
        let lvl = self.level.as_str();
        let c = Some(container);
        let sc = get(c, "securityContext");
        if not_false(get(sc, "privileged")) {
            self.report(
                "privileged",
                format_args!("{o}.securityContext.privileged"),
                format_args!("must be unset or false at {lvl}"),
            );
        }
        self.capabilities(o, get(sc, "capabilities"));
        if let Some(ports) = get(c, "ports").and_then(Value::as_array) {
            for (j, port) in ports.iter().enumerate() {
                let host_port = get(Some(port), "hostPort");
                if host_port.is_some_and(|p| p.as_i64() != Some(0)) {
                    self.report(
                        "host_ports",
                        format_args!("{o}.ports[{j}].hostPort"),
                        format_args!(
                            "hostPort {} is not allowed at {lvl} (allowed: 0 or unset)",
                            Shown(host_port)
                        ),
                    );
                }
            }
        }
        let lifecycle = get(c, "lifecycle");
        for (parent, name, handler) in [
            ("", "livenessProbe", get(c, "livenessProbe")),
            ("", "readinessProbe", get(c, "readinessProbe")),
            ("", "startupProbe", get(c, "startupProbe")),
            ("lifecycle.", "postStart", get(lifecycle, "postStart")),
            ("lifecycle.", "preStop", get(lifecycle, "preStop")),
        ] {
            for action in ["httpGet", "tcpSocket"] {
                let host = get(get(handler, action), "host");
                if host.is_some_and(|h| h.as_str() != Some("")) {
                    self.report(
                        "host_probes",
                        format_args!("{o}.{parent}{name}.{action}.host"),
                        format_args!(
                            "host {} is not allowed at {lvl} (allowed: empty or unset)",
                            Shown(host)
                        ),
                    );
                }
            }
        }
        // NB: baseline lets a pod in a user namespace set any procMount; restricted never does.
        let proc_mount = get(sc, "procMount");
        if (self.restricted() || !self.user_ns)
            && proc_mount.is_some_and(|p| p.as_str() != Some("Default"))
        {
            self.report(
                "proc_mount",
                format_args!("{o}.securityContext.procMount"),
                format_args!(
                    "procMount {} is not allowed at {lvl} (allowed: Default or unset)",
                    Shown(proc_mount)
                ),
            );
        }
        if self.restricted()
            && !self.windows
            && get(sc, "allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false)
        {
            self.report(
                "allow_privilege_escalation",
                format_args!("{o}.securityContext.allowPrivilegeEscalation"),
                format_args!("must be false at restricted"),
            );
        }
        self.security_context(o, sc)
    }

    /// Checks a container's `securityContext.capabilities`.
    fn capabilities(&mut self, o: Owner<'_>, caps: Option<&Value>) {
        let lvl = self.level.as_str();
        // NB: restricted capabilities override the baseline check, and skip Windows pods entirely.
        let allowed = match (self.restricted(), self.windows) {
            (false, _) => BASELINE_CAPABILITIES,
            (true, true) => return,
            (true, false) => {
                let drops_all = get(caps, "drop")
                    .and_then(Value::as_array)
                    .is_some_and(|d| d.iter().any(|c| c.as_str() == Some("ALL")));
                if !drops_all {
                    self.report(
                        "capabilities",
                        format_args!("{o}.securityContext.capabilities.drop"),
                        format_args!("must include ALL at restricted"),
                    );
                }
                RESTRICTED_CAPABILITIES
            }
        };
        let Some(add) = get(caps, "add").and_then(Value::as_array) else {
            return;
        };
        for (k, cap) in add.iter().enumerate() {
            if !cap.as_str().is_some_and(|c| listed(allowed, c)) {
                self.report(
                    "capabilities",
                    format_args!("{o}.securityContext.capabilities.add[{k}]"),
                    format_args!(
                        "capability {} is not allowed at {lvl} (allowed: {allowed})",
                        Shown(Some(cap))
                    ),
                );
            }
        }
    }

    /// Checks `spec.volumes`.
    fn volumes(&mut self, spec: Option<&Value>) {
        let Some(volumes) = get(spec, "volumes").and_then(Value::as_array) else {
            return;
        };
        let lvl = self.level.as_str();
        for (i, volume) in volumes.iter().enumerate() {
            let Some(fields) = volume.as_object() else {
                continue;
            };
            // NB: upstream passes a volume that also has an allowed source; the API server rejects
            // a volume with two sources anyway, so every restricted source is reported.
            for (source, value) in fields {
                if value.is_null() {
                    continue;
                }
                if source == "hostPath" {
                    self.report(
                        "host_path_volumes",
                        format_args!("spec.volumes[{i}].hostPath"),
                        format_args!("hostPath volumes are forbidden at {lvl}"),
                    );
                } else if self.restricted() && listed(RESTRICTED_VOLUMES, source) {
                    self.report(
                        "restricted_volumes",
                        format_args!("spec.volumes[{i}].{source}"),
                        format_args!(
                            "{source} volumes are not allowed at restricted \
                             (allowed: {ALLOWED_VOLUMES})"
                        ),
                    );
                }
            }
        }
    }

    /// Checks the legacy AppArmor annotations of the template's metadata.
    fn annotations(&mut self, metadata: Option<&Value>) {
        let Some(annotations) = get(metadata, "annotations").and_then(Value::as_object) else {
            return;
        };
        let allowed = |v: &Value| match v {
            Value::Null => true,
            Value::String(s) => {
                s.is_empty() || s == "runtime/default" || s.starts_with("localhost/")
            }
            _ => false,
        };
        let mut bad: Vec<(&String, &Value)> = annotations
            .iter()
            .filter(|(k, v)| k.starts_with(APPARMOR_ANNOTATION_PREFIX) && !allowed(v))
            .collect();
        // NB: map order depends on serde_json's `preserve_order` feature; findings must not.
        bad.sort_unstable_by_key(|(k, _)| *k);
        let lvl = self.level.as_str();
        for (key, value) in bad {
            self.report(
                "app_armor",
                format_args!("metadata.annotations[{key:?}]"),
                format_args!(
                    "apparmor profile {} is not allowed at {lvl} \
                     (allowed: runtime/default, localhost/*, empty or unset)",
                    Shown(Some(value))
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests;
