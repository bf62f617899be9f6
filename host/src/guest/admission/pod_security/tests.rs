//! Unit tests of every Pod Security rule at each level, from the upstream definitions.

use super::*;
use serde_json::json;

/// A pod meeting restricted, with an init container, a container and allowed volumes.
fn conformant() -> Value {
    json!({
        "metadata": {
            "labels": {"app": "web"},
            "annotations": {
                "container.apparmor.security.beta.kubernetes.io/app": "runtime/default",
                "container.apparmor.security.beta.kubernetes.io/init": "localhost/custom",
                "unrelated": "x"
            }
        },
        "spec": {
            "os": {"name": "linux"},
            "hostUsers": true,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
                "sysctls": [{"name": "net.ipv4.tcp_slow_start_after_idle", "value": "0"}]
            },
            "initContainers": [{
                "name": "init",
                "image": "busybox",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}
                }
            }],
            "containers": [{
                "name": "app",
                "image": "nginx",
                "ports": [{"containerPort": 8080, "hostPort": 0}],
                "livenessProbe": {"httpGet": {"path": "/", "port": 8080, "host": ""}},
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "privileged": false,
                    "procMount": "Default",
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                    "seLinuxOptions": {"type": "container_engine_t", "level": "s0:c1"},
                    "appArmorProfile": {"type": "Localhost", "localhostProfile": "p"},
                    "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
                    "windowsOptions": {"hostProcess": false}
                }
            }],
            "volumes": [
                {"name": "c", "configMap": {"name": "c"}},
                {"name": "s", "secret": {"secretName": "s"}},
                {"name": "e", "emptyDir": {}},
                {"name": "p", "persistentVolumeClaim": {"claimName": "p"}},
                {"name": "i", "image": {"reference": "x"}},
                {"name": "d", "hostPath": null},
                {"name": "n"}
            ]
        }
    })
}

fn with(mutate: impl FnOnce(&mut Value)) -> Value {
    let mut t = conformant();
    mutate(&mut t);
    t
}

fn found(level: Level, t: &Value) -> Vec<(String, &'static str)> {
    check_template(level, t, "")
        .into_iter()
        .map(|f| (f.path, f.rule))
        .collect()
}

fn pairs(expected: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
    expected.iter().map(|(p, r)| (p.to_string(), *r)).collect()
}

/// Asserts nothing at privileged and exactly these (path, rule) findings at the others.
fn expect(t: &Value, baseline: &[(&str, &'static str)], restricted: &[(&str, &'static str)]) {
    assert_eq!(found(Level::Privileged, t), pairs(&[]), "privileged");
    assert_eq!(found(Level::Baseline, t), pairs(baseline), "baseline");
    assert_eq!(found(Level::Restricted, t), pairs(restricted), "restricted");
}

const C0: &str = "spec.containers[0].securityContext";
const I0: &str = "spec.initContainers[0].securityContext";

fn sc(t: &mut Value) -> &mut Value {
    &mut t["spec"]["containers"][0]["securityContext"]
}

#[test]
fn conformant_template_passes_every_level() {
    expect(&conformant(), &[], &[]);
}

#[test]
fn default_template_passes_baseline_fails_restricted() {
    let t = json!({"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:alpine","imagePullPolicy":"IfNotPresent","ports":[{"containerPort":80}]}]}});
    let c = "spec.template.spec.containers[0].securityContext";
    assert!(check_template(Level::Baseline, &t, "spec.template").is_empty());
    assert!(check_template(Level::Privileged, &t, "spec.template").is_empty());
    let got: Vec<_> = check_template(Level::Restricted, &t, "spec.template")
        .into_iter()
        .map(|f| (f.path, f.rule))
        .collect();
    assert_eq!(
        got,
        vec![
            (format!("{c}.capabilities.drop"), "capabilities"),
            (
                "spec.template.spec.securityContext.seccompProfile.type".into(),
                "seccomp"
            ),
            (
                format!("{c}.allowPrivilegeEscalation"),
                "allow_privilege_escalation"
            ),
            (
                "spec.template.spec.securityContext.runAsNonRoot".into(),
                "run_as_non_root"
            ),
        ]
    );
}

#[test]
fn hostile_template_fails_baseline_on_each_field() {
    let t = json!({"spec": {
        "hostNetwork": true, "hostPID": true,
        "containers": [{"name": "x", "securityContext": {"privileged": true}}],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}]
    }});
    let b = [
        ("spec.hostNetwork", "host_namespaces"),
        ("spec.hostPID", "host_namespaces"),
        (
            "spec.containers[0].securityContext.privileged",
            "privileged",
        ),
        ("spec.volumes[0].hostPath", "host_path_volumes"),
    ];
    assert_eq!(found(Level::Baseline, &t), pairs(&b));
    let r = found(Level::Restricted, &t);
    for f in &b {
        assert!(r.contains(&(f.0.to_string(), f.1)), "{f:?} in {r:?}");
    }
    let msgs = check_template(Level::Baseline, &t, "");
    assert_eq!(msgs[0].message, "must be unset or false at baseline");
    assert_eq!(
        msgs[3].message,
        "hostPath volumes are forbidden at baseline"
    );
    assert!(found(Level::Privileged, &t).is_empty());
}

#[test]
fn host_process() {
    let t = with(|t| {
        t["spec"]["securityContext"]["windowsOptions"] = json!({"hostProcess": true});
        sc(t)["windowsOptions"]["hostProcess"] = json!(true);
    });
    let f = [
        (
            "spec.securityContext.windowsOptions.hostProcess",
            "host_process",
        ),
        (
            "spec.containers[0].securityContext.windowsOptions.hostProcess",
            "host_process",
        ),
    ];
    expect(&t, &f, &f);
    let t =
        with(|t| t["spec"]["securityContext"]["windowsOptions"] = json!({"hostProcess": false}));
    expect(&t, &[], &[]);
}

#[test]
fn host_namespaces() {
    let t = with(|t| {
        t["spec"]["hostNetwork"] = json!(true);
        t["spec"]["hostPID"] = json!(true);
        t["spec"]["hostIPC"] = json!(true);
    });
    let f = [
        ("spec.hostNetwork", "host_namespaces"),
        ("spec.hostPID", "host_namespaces"),
        ("spec.hostIPC", "host_namespaces"),
    ];
    expect(&t, &f, &f);
    let t = with(|t| {
        t["spec"]["hostNetwork"] = json!(false);
        t["spec"]["hostIPC"] = json!(null);
    });
    expect(&t, &[], &[]);
}

#[test]
fn privileged() {
    let path = format!("{C0}.privileged");
    let f = [(path.as_str(), "privileged")];
    expect(&with(|t| sc(t)["privileged"] = json!(true)), &f, &f);
    let t = with(|t| t["spec"]["initContainers"][0]["securityContext"]["privileged"] = json!(true));
    let p = format!("{I0}.privileged");
    expect(&t, &[(&p, "privileged")], &[(&p, "privileged")]);
    expect(&with(|t| sc(t)["privileged"] = json!(false)), &[], &[]);
}

#[test]
fn capabilities_baseline_and_restricted() {
    let t = with(|t| sc(t)["capabilities"]["add"] = json!(["NET_BIND_SERVICE", "SYS_ADMIN"]));
    let p = format!("{C0}.capabilities.add[1]");
    expect(&t, &[(&p, "capabilities")], &[(&p, "capabilities")]);
    let msg = &check_template(Level::Baseline, &t, "")[0].message;
    assert!(msg.starts_with(
        "capability SYS_ADMIN is not allowed at baseline (allowed: AUDIT_WRITE, CHOWN,"
    ));

    // in the baseline default set, but restricted allows only NET_BIND_SERVICE
    let t = with(|t| sc(t)["capabilities"]["add"] = json!(["CHOWN"]));
    let p = format!("{C0}.capabilities.add[0]");
    expect(&t, &[], &[(&p, "capabilities")]);

    // restricted requires drop ALL on every container
    let t = with(|t| sc(t)["capabilities"]["drop"] = json!(["NET_RAW"]));
    let p = format!("{C0}.capabilities.drop");
    expect(&t, &[], &[(&p, "capabilities")]);
    let t = with(|t| {
        t["spec"]["initContainers"][0]["securityContext"] =
            json!({"allowPrivilegeEscalation": false})
    });
    let p = format!("{I0}.capabilities.drop");
    expect(&t, &[], &[(&p, "capabilities")]);

    // Windows pods are exempt from restricted capabilities, which override baseline's
    let t = with(|t| {
        t["spec"]["os"] = json!({"name": "windows"});
        sc(t)["capabilities"] = json!({"add": ["SYS_ADMIN"]});
    });
    let p = format!("{C0}.capabilities.add[0]");
    expect(&t, &[(&p, "capabilities")], &[]);
}

#[test]
fn host_path_volumes() {
    let t = with(|t| t["spec"]["volumes"][2] = json!({"name": "h", "hostPath": {"path": "/etc"}}));
    let f = [("spec.volumes[2].hostPath", "host_path_volumes")];
    expect(&t, &f, &f);
    let msg = &check_template(Level::Restricted, &t, "")[0].message;
    assert_eq!(msg, "hostPath volumes are forbidden at restricted");
}

#[test]
fn restricted_volumes() {
    let t = with(|t| {
        t["spec"]["volumes"][0] = json!({"name": "g", "gcePersistentDisk": {"pdName": "x"}});
        t["spec"]["volumes"][1] = json!({"name": "n", "nfs": {"server": "s", "path": "/"}});
    });
    expect(
        &t,
        &[],
        &[
            ("spec.volumes[0].gcePersistentDisk", "restricted_volumes"),
            ("spec.volumes[1].nfs", "restricted_volumes"),
        ],
    );
    for source in ALLOWED_VOLUMES.split(", ") {
        let t = with(|t| t["spec"]["volumes"] = json!([{"name": "v", source: {}}]));
        expect(&t, &[], &[]);
    }
}

#[test]
fn host_ports() {
    let t = with(|t| {
        t["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": 80}, {"containerPort": 81, "hostPort": 8080}]);
    });
    let f = [("spec.containers[0].ports[1].hostPort", "host_ports")];
    expect(&t, &f, &f);
    let msg = &check_template(Level::Baseline, &t, "")[0].message;
    assert_eq!(
        msg,
        "hostPort 8080 is not allowed at baseline (allowed: 0 or unset)"
    );
    let t = with(|t| t["spec"]["containers"][0]["ports"][0]["hostPort"] = json!(null));
    expect(&t, &[], &[]);
}

#[test]
fn host_probes() {
    let t = with(|t| {
        let c = &mut t["spec"]["containers"][0];
        c["livenessProbe"]["httpGet"]["host"] = json!("10.0.0.1");
        c["startupProbe"] = json!({"tcpSocket": {"port": 1, "host": "metadata"}});
        c["lifecycle"] = json!({"preStop": {"httpGet": {"port": 1, "host": "x"}},
                                "postStart": {"tcpSocket": {"port": 1, "host": ""}}});
    });
    let f = [
        (
            "spec.containers[0].livenessProbe.httpGet.host",
            "host_probes",
        ),
        (
            "spec.containers[0].startupProbe.tcpSocket.host",
            "host_probes",
        ),
        (
            "spec.containers[0].lifecycle.preStop.httpGet.host",
            "host_probes",
        ),
    ];
    expect(&t, &f, &f);
}

#[test]
fn app_armor_fields_and_annotations() {
    let t = with(|t| {
        t["spec"]["securityContext"]["appArmorProfile"] = json!({"type": "Unconfined"});
        t["spec"]["initContainers"][0]["securityContext"]["appArmorProfile"] = json!({});
        let a = &mut t["metadata"]["annotations"];
        a["container.apparmor.security.beta.kubernetes.io/z"] = json!("unconfined");
        a["container.apparmor.security.beta.kubernetes.io/b"] = json!("custom");
    });
    let f = [
        ("spec.securityContext.appArmorProfile.type", "app_armor"),
        (
            "spec.initContainers[0].securityContext.appArmorProfile.type",
            "app_armor",
        ),
        (
            r#"metadata.annotations["container.apparmor.security.beta.kubernetes.io/b"]"#,
            "app_armor",
        ),
        (
            r#"metadata.annotations["container.apparmor.security.beta.kubernetes.io/z"]"#,
            "app_armor",
        ),
    ];
    expect(&t, &f, &f);
    let t = with(|t| {
        t["spec"]["securityContext"]["appArmorProfile"] = json!({"type": "RuntimeDefault"})
    });
    expect(&t, &[], &[]);
}

#[test]
fn selinux() {
    let t = with(|t| {
        t["spec"]["securityContext"]["seLinuxOptions"] = json!({"type": "spc_t"});
        sc(t)["seLinuxOptions"] = json!({"user": "root", "role": "sysadm_r", "type": ""});
    });
    let f = [
        ("spec.securityContext.seLinuxOptions.type", "selinux"),
        (
            "spec.containers[0].securityContext.seLinuxOptions.user",
            "selinux",
        ),
        (
            "spec.containers[0].securityContext.seLinuxOptions.role",
            "selinux",
        ),
    ];
    expect(&t, &f, &f);
    for ty in SELINUX_TYPES.split(", ") {
        let t = with(|t| t["spec"]["securityContext"]["seLinuxOptions"] = json!({"type": ty}));
        expect(&t, &[], &[]);
    }
}

#[test]
fn proc_mount() {
    let t = with(|t| sc(t)["procMount"] = json!("Unmasked"));
    let p = format!("{C0}.procMount");
    expect(&t, &[(&p, "proc_mount")], &[(&p, "proc_mount")]);
    // a user-namespaced pod may unmask /proc at baseline, never at restricted
    let t = with(|t| {
        sc(t)["procMount"] = json!("Unmasked");
        t["spec"]["hostUsers"] = json!(false);
    });
    expect(&t, &[], &[(&p, "proc_mount")]);
}

#[test]
fn seccomp() {
    let pod = "spec.securityContext.seccompProfile.type";
    let t = with(|t| t["spec"]["securityContext"]["seccompProfile"]["type"] = json!("Unconfined"));
    expect(&t, &[(pod, "seccomp")], &[(pod, "seccomp")]);
    // unset passes baseline; restricted needs it on the pod or on every container
    let t = with(|t| t["spec"]["securityContext"]["seccompProfile"] = json!(null));
    expect(&t, &[], &[(pod, "seccomp")]);
    let t = with(|t| {
        t["spec"]["securityContext"]["seccompProfile"] = json!(null);
        t["spec"]["initContainers"][0]["securityContext"]["seccompProfile"] =
            json!({"type": "RuntimeDefault"});
    });
    expect(&t, &[], &[]);
    let t = with(|t| sc(t)["seccompProfile"]["type"] = json!("Unconfined"));
    let p = format!("{C0}.seccompProfile.type");
    expect(&t, &[(&p, "seccomp")], &[(&p, "seccomp")]);
    // Windows pods skip restricted seccomp, which overrides the baseline check
    let t = with(|t| {
        t["spec"]["os"]["name"] = json!("windows");
        sc(t)["seccompProfile"]["type"] = json!("Unconfined");
    });
    expect(&t, &[(&p, "seccomp")], &[]);
}

#[test]
fn sysctls() {
    let t = with(|t| {
        t["spec"]["securityContext"]["sysctls"] = json!([
            {"name": "net.ipv4.tcp_rmem", "value": "1"},
            {"name": "kernel.msgmax", "value": "1"},
            {"value": "1"}
        ]);
    });
    let f = [
        ("spec.securityContext.sysctls[1].name", "sysctls"),
        ("spec.securityContext.sysctls[2].name", "sysctls"),
    ];
    expect(&t, &f, &f);
    assert!(
        check_template(Level::Baseline, &t, "")[0]
            .message
            .starts_with(
                "sysctl kernel.msgmax is not allowed at baseline (allowed: kernel.shm_rmid_forced,"
            )
    );
    for name in SAFE_SYSCTLS.split(", ") {
        let t = with(|t| t["spec"]["securityContext"]["sysctls"] = json!([{"name": name}]));
        expect(&t, &[], &[]);
    }
}

#[test]
fn allow_privilege_escalation() {
    let p = format!("{C0}.allowPrivilegeEscalation");
    let f = [(p.as_str(), "allow_privilege_escalation")];
    let t = with(|t| sc(t)["allowPrivilegeEscalation"] = json!(null));
    expect(&t, &[], &f);
    let t = with(|t| sc(t)["allowPrivilegeEscalation"] = json!(true));
    expect(&t, &[], &f);
    assert_eq!(
        check_template(Level::Restricted, &t, "")[0].message,
        "must be false at restricted"
    );
    let t = with(|t| {
        sc(t)["allowPrivilegeEscalation"] = json!(true);
        t["spec"]["os"]["name"] = json!("windows");
    });
    expect(&t, &[], &[]);
}

#[test]
fn run_as_non_root() {
    let pod = "spec.securityContext.runAsNonRoot";
    // pod-level true, one container opts out
    let t = with(|t| sc(t)["runAsNonRoot"] = json!(false));
    let p = format!("{C0}.runAsNonRoot");
    expect(&t, &[], &[(&p, "run_as_non_root")]);
    // neither pod nor the init container sets it: reported at the pod-level field
    let t = with(|t| {
        t["spec"]["securityContext"]["runAsNonRoot"] = json!(null);
        sc(t)["runAsNonRoot"] = json!(true);
    });
    expect(&t, &[], &[(pod, "run_as_non_root")]);
    // every container sets it
    let t = with(|t| {
        t["spec"]["securityContext"]["runAsNonRoot"] = json!(null);
        sc(t)["runAsNonRoot"] = json!(true);
        t["spec"]["initContainers"][0]["securityContext"]["runAsNonRoot"] = json!(true);
    });
    expect(&t, &[], &[]);
    // pod-level false is reported once, even though containers inherit it
    let t = with(|t| t["spec"]["securityContext"]["runAsNonRoot"] = json!(false));
    expect(&t, &[], &[(pod, "run_as_non_root")]);
    // user namespaces relax it
    let t = with(|t| {
        t["spec"]["securityContext"]["runAsNonRoot"] = json!(false);
        t["spec"]["hostUsers"] = json!(false);
    });
    expect(&t, &[], &[]);
}

#[test]
fn run_as_user() {
    let t = with(|t| {
        t["spec"]["securityContext"]["runAsUser"] = json!(0);
        t["spec"]["initContainers"][0]["securityContext"]["runAsUser"] = json!(0);
    });
    let f = [
        ("spec.securityContext.runAsUser", "run_as_user"),
        (
            "spec.initContainers[0].securityContext.runAsUser",
            "run_as_user",
        ),
    ];
    expect(&t, &[], &f);
    let t = with(|t| {
        t["spec"]["securityContext"]["runAsUser"] = json!(0);
        t["spec"]["hostUsers"] = json!(false);
    });
    expect(&t, &[], &[]);
    expect(&with(|t| sc(t)["runAsUser"] = json!(65534)), &[], &[]);
}

#[test]
fn wrong_json_types_are_conservative() {
    let t = with(|t| {
        sc(t)["privileged"] = json!("yes");
        t["spec"]["hostNetwork"] = json!(0);
        sc(t)["allowPrivilegeEscalation"] = json!("false");
        t["spec"]["containers"][0]["ports"][0]["hostPort"] = json!("0");
        sc(t)["runAsUser"] = json!("1000");
    });
    expect(
        &t,
        &[
            ("spec.hostNetwork", "host_namespaces"),
            (
                "spec.containers[0].securityContext.privileged",
                "privileged",
            ),
            ("spec.containers[0].ports[0].hostPort", "host_ports"),
        ],
        &[
            ("spec.hostNetwork", "host_namespaces"),
            (
                "spec.containers[0].securityContext.privileged",
                "privileged",
            ),
            ("spec.containers[0].ports[0].hostPort", "host_ports"),
            (
                "spec.containers[0].securityContext.allowPrivilegeEscalation",
                "allow_privilege_escalation",
            ),
            (
                "spec.containers[0].securityContext.runAsUser",
                "run_as_user",
            ),
        ],
    );
    // a string "false" does not put the pod in a user namespace
    let t = with(|t| {
        t["spec"]["hostUsers"] = json!("false");
        t["spec"]["securityContext"]["runAsUser"] = json!(0);
    });
    expect(
        &t,
        &[],
        &[("spec.securityContext.runAsUser", "run_as_user")],
    );
}

#[test]
fn never_panics_on_odd_json() {
    let odd = [
        json!(null),
        json!(true),
        json!(-1),
        json!(1.5),
        json!("x"),
        json!([]),
        json!([null, 1, "a", {}]),
        json!({}),
    ];
    let pointers = [
        "",
        "/spec",
        "/metadata",
        "/metadata/annotations",
        "/spec/securityContext",
        "/spec/containers",
        "/spec/containers/0",
        "/spec/containers/0/securityContext",
        "/spec/containers/0/securityContext/capabilities",
        "/spec/containers/0/securityContext/capabilities/add",
        "/spec/containers/0/securityContext/capabilities/drop",
        "/spec/containers/0/ports",
        "/spec/containers/0/livenessProbe",
        "/spec/containers/0/securityContext/seLinuxOptions",
        "/spec/volumes",
        "/spec/volumes/0",
        "/spec/securityContext/sysctls",
        "/spec/securityContext/sysctls/0",
        "/spec/securityContext/seccompProfile",
        "/spec/os",
        "/spec/hostUsers",
    ];
    for pointer in pointers {
        for v in &odd {
            let mut t = conformant();
            match t.pointer_mut(pointer) {
                Some(slot) => *slot = v.clone(),
                None => panic!("bad pointer {pointer}"),
            }
            for level in [Level::Privileged, Level::Baseline, Level::Restricted] {
                for f in check_template(level, &t, "spec.template") {
                    assert!(RULES.contains(&f.rule));
                    assert!(f.path.starts_with("spec.template."), "{}", f.path);
                    assert!(f.message.contains(level.as_str()), "{}", f.message);
                }
            }
        }
    }
    assert!(check_template(Level::Restricted, &json!("pod"), "").is_empty());
}

#[test]
fn templates_by_kind() {
    let deployment = json!({"kind": "Deployment", "spec": {"template": {"spec": {}}}});
    let got = templates("Deployment", &deployment);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, "spec.template");
    assert!(std::ptr::eq(got[0].0, &deployment["spec"]["template"]));

    let cron =
        json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"hostPID": true}}}}}});
    let got = templates("CronJob", &cron);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, "spec.jobTemplate.spec.template");
    let f = check_template(Level::Baseline, got[0].0, &got[0].1);
    assert_eq!(f[0].path, "spec.jobTemplate.spec.template.spec.hostPID");

    let pod = json!({"kind": "Pod", "spec": {"containers": []}});
    let got = templates("Pod", &pod);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, "");
    assert!(std::ptr::eq(got[0].0, &pod));

    for kind in [
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "ReplicationController",
    ] {
        assert_eq!(templates(kind, &deployment)[0].1, "spec.template");
    }
    assert_eq!(
        templates("PodTemplate", &json!({"template": {}}))[0].1,
        "template"
    );
    assert!(templates("Service", &json!({"spec": {"template": {}}})).is_empty());
    assert!(templates("Deployment", &json!({"spec": {}})).is_empty());
    assert!(templates("Deployment", &json!("x")).is_empty());
}

#[test]
fn findings_follow_rule_order() {
    let t = json!({"spec": {
        "securityContext": {"runAsUser": 0, "sysctls": [{"name": "kernel.sem"}]},
        "containers": [{"name": "a", "securityContext": {"runAsNonRoot": false, "privileged": true}}],
        "volumes": [{"name": "h", "hostPath": {}}],
        "hostIPC": true
    }});
    let rules: Vec<_> = check_template(Level::Restricted, &t, "")
        .into_iter()
        .map(|f| f.rule)
        .collect();
    let mut sorted = rules.clone();
    sorted.sort_by_key(|r| RULES.iter().position(|x| x == r));
    assert_eq!(rules, sorted);
    assert_eq!(rules.first(), Some(&"host_namespaces"));
    assert_eq!(rules.last(), Some(&"run_as_user"));
}

#[test]
fn level_parse_order_display() {
    for level in [Level::Privileged, Level::Baseline, Level::Restricted] {
        assert_eq!(level.as_str().parse::<Level>(), Ok(level));
        assert_eq!(level.to_string(), level.as_str());
    }
    assert!(Level::Privileged < Level::Baseline && Level::Baseline < Level::Restricted);
    assert_eq!(Level::default(), Level::Baseline);
    let err = "Restricted".parse::<Level>().unwrap_err();
    assert_eq!(err, UnknownLevel("Restricted".into()));
    assert_eq!(
        err.to_string(),
        "unknown Pod Security level `Restricted`; expected privileged, baseline or restricted"
    );
    let _: &dyn std::error::Error = &err;
    assert!("".parse::<Level>().is_err());
}
