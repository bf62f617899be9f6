//! The dry run a candidate set of guests must pass before it is put in force: every live
//! AppService rendered, in the sandbox, by the guest that would govern it. Nothing is written.

use std::collections::HashMap;

use futures::{StreamExt, stream};
use kube::ResourceExt;

use super::Set;
use crate::crd::AppService;
use crate::guest::{self, admission::Level};

/// Most dry-run renders at once (the runtime caps sandbox instances on its own as well).
const CONCURRENCY: usize = 16;

/// The first AppService (by namespace and name) a candidate failed on.
#[derive(Debug, thiserror::Error)]
#[error("guest {digest} failed on AppService {namespace}/{name} ({failed} of {total} failed)")]
pub struct Failure {
    /// Digest of the guest that failed.
    pub digest: String,
    /// Namespace of the AppService.
    pub namespace: String,
    /// Name of the AppService.
    pub name: String,
    /// How many AppServices failed.
    pub failed: usize,
    /// How many were rendered.
    pub total: usize,
    /// What the guest did.
    #[source]
    pub source: guest::Error,
}

/// Renders every AppService in `apps` through the guest `set` selects for it, under the output
/// policy at the level `levels` gives for its namespace. Returns how many were rendered, or the
/// first failure.
pub async fn dry_run(
    set: &Set,
    apps: &[AppService],
    levels: &HashMap<String, Option<Level>>,
) -> Result<usize, Failure> {
    // NB: owned futures (no closures over borrowed AppServices in the stream), so the caller's
    // future stays `Send` for `tokio::spawn`.
    let renders: Vec<_> = apps
        .iter()
        .map(|app| {
            let policy = set.select(app).policy;
            let level = app
                .namespace()
                .and_then(|ns| levels.get(&ns).copied().flatten());
            let app = app.clone();
            async move {
                let result = policy.render(&app, level).await;
                result.err().map(|e| {
                    let digest = policy.digest().to_owned();
                    (
                        app.namespace().unwrap_or_default(),
                        app.name_any(),
                        digest,
                        e,
                    )
                })
            }
        })
        .collect();
    let mut failures: Vec<(String, String, String, guest::Error)> = stream::iter(renders)
        .buffer_unordered(CONCURRENCY)
        .filter_map(futures::future::ready)
        .collect()
        .await;
    failures.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let failed = failures.len();
    match failures.into_iter().next() {
        None => Ok(apps.len()),
        Some((namespace, name, digest, source)) => Err(Failure {
            digest,
            namespace,
            name,
            failed,
            total: apps.len(),
            source,
        }),
    }
}
