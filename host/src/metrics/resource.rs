//! The resource a request to the API server is about, read from its path, as a metric label
//! with a bounded set of values.

/// The resources the operator reads and writes, as [`of`] names them.
const KNOWN: [&str; 8] = [
    "appservices",
    "configmaps",
    "deployments",
    "events",
    "leases",
    "namespaces",
    "secrets",
    "services",
];

/// Every value [`of`] returns.
pub const LABELS: [&str; 10] = [
    "appservices",
    "appservices/status",
    "configmaps",
    "deployments",
    "events",
    "leases",
    "namespaces",
    "other",
    "secrets",
    "services",
];

/// The label for the request path `path`: the resource (`deployments`), with `/status` for the
/// status subresource (`appservices/status`), or `other` for anything the operator does not
/// normally ask for (discovery, `/version`, another subresource).
///
/// NB: the label values are fixed, so a path cannot grow the metric's series.
pub fn of(path: &str) -> &'static str {
    let mut segments = path.trim_start_matches('/').split('/');
    // `/api/v1/...` (the core group) or `/apis/<group>/<version>/...`.
    let after_version = match segments.next() {
        Some("api") => segments.next(),
        Some("apis") => segments.nth(1),
        _ => None,
    };
    if after_version.is_none() {
        return "other";
    }
    let rest: Vec<&str> = segments.collect();
    // `namespaces/<ns>/<resource>...` is namespaced; `namespaces[/<name>]` is the namespace itself.
    let rest = match rest.as_slice() {
        ["namespaces", _, resource @ ..] if !resource.is_empty() => resource,
        other => other,
    };
    let Some(&resource) = rest.first() else {
        return "other";
    };
    let Some(known) = KNOWN.iter().copied().find(|k| *k == resource) else {
        return "other";
    };
    match rest.get(2) {
        None => known,
        Some(&"status") if known == "appservices" => "appservices/status",
        Some(_) => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::{KNOWN, LABELS, of};

    #[test]
    fn paths_name_their_resource() {
        for (path, label) in [
            ("/apis/apps/v1/namespaces/ns/deployments/web", "deployments"),
            ("/apis/apps/v1/deployments", "deployments"),
            ("/api/v1/namespaces/ns/services/web", "services"),
            ("/api/v1/namespaces/ns/services", "services"),
            ("/api/v1/namespaces", "namespaces"),
            ("/api/v1/namespaces/ns", "namespaces"),
            (
                "/apis/apps.kudevops.io/v1alpha1/namespaces/ns/appservices/web/status",
                "appservices/status",
            ),
            (
                "/apis/apps.kudevops.io/v1alpha1/namespaces/ns/appservices/web",
                "appservices",
            ),
            ("/apis/apps.kudevops.io/v1alpha1/appservices", "appservices"),
            ("/apis/events.k8s.io/v1/namespaces/ns/events", "events"),
            (
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/app-operator",
                "leases",
            ),
            ("/api/v1/namespaces/ns/configmaps/guest", "configmaps"),
            ("/api/v1/namespaces/ns/secrets/pull", "secrets"),
        ] {
            assert_eq!(of(path), label, "{path}");
        }
    }

    #[test]
    fn every_label_is_listed() {
        for known in KNOWN {
            assert!(LABELS.contains(&known), "{known}");
        }
        assert!(LABELS.contains(&"appservices/status") && LABELS.contains(&"other"));
    }

    #[test]
    fn anything_else_is_other() {
        for path in [
            "/version",
            "/apis",
            "/api/v1",
            "/apis/apps/v1",
            "/api/v1/namespaces/ns/pods/p",
            "/api/v1/namespaces/ns/services/web/proxy",
            "/apis/apps/v1/namespaces/ns/deployments/web/scale",
            "",
        ] {
            assert_eq!(of(path), "other", "{path}");
        }
    }
}
