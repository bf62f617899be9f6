//! One reconciliation: render the AppService through the guest, apply the children, prune the
//! ones no longer emitted, write the status (held back briefly while a rollout that has just
//! started settles) and publish the Events worth seeing.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde::de::IgnoredAny;
use serde_json::json;
use tracing::{Span, debug, field, info, instrument, warn};

use super::Context;
use super::apply::{self, Applied, Change};
use super::error::{Error, Result};
use super::events::{self, Facts, RolledBack};
use super::rendered::Rendered;
use super::status::{self, Outcome};
use crate::consts::FIELD_MANAGER;
use crate::crd::{AppService, AppServiceStatus};
use crate::error_chain;
use crate::guest::{self, DesiredObject};
use crate::stamp;
use crate::swap;

/// Reconciles one AppService. The root span of everything the controller does for it.
///
/// A failing guest, or output the host refuses, leaves the children untouched: nothing is
/// applied or deleted, the failure is reported in the status (`GuestError`, reason
/// `OutputRefused` for a refusal) and as a Warning Event, and the error goes to
/// [`super::error_policy`] for a retry with backoff. So does a child that exists under another
/// controller (`ChildConflict`): nothing is adopted.
///
/// When the AppService, its guest and its children are as the last successful reconcile left
/// them (a child's status changed, or a resync), the guest is not called again
/// ([`super::rendered`]).
#[instrument(skip_all, fields(namespace, name, generation, guest))]
pub async fn reconcile(app: Arc<AppService>, ctx: Arc<Context>) -> Result<Action> {
    let span = Span::current();
    span.record(
        "namespace",
        field::display(app.namespace().unwrap_or_default()),
    );
    span.record("name", field::display(app.name_any()));
    span.record("generation", app.metadata.generation.unwrap_or_default());
    let _timer = ctx.metrics.reconcile_started();
    if app.meta().deletion_timestamp.is_some() {
        // NB: the children carry ownerReferences; the garbage collector removes them.
        ctx.per_app.forget(&app);
        return Ok(Action::await_change());
    }
    ctx.caches_synced().await;
    if ctx.namespace_terminating(&app) {
        // NB: the namespace controller deletes the children before the AppService, and the API
        // server refuses to create anything in the namespace: re-applying them (and reporting
        // each refusal) would only fight the deletion.
        debug!("namespace being deleted; nothing applied");
        ctx.per_app.forget(&app);
        return Ok(Action::await_change());
    }
    // NB: the cache may not show the status the last reconcile wrote yet; start from that one.
    let app = ctx.per_app.written.latest(app);

    let mut facts = Facts::default();
    let selected = ctx.select(&app);
    let uid = app.uid().unwrap_or_default();
    let key = selected.policy.render_key(&app, ctx.namespace_level(&app));
    let (policy, report, applied) = match unchanged(&ctx, &app, &uid, key) {
        Some((report, applied)) => {
            ctx.metrics.render_skipped();
            span.record("guest", field::display(selected.policy.digest()));
            debug!("guest input, guest and children as last rendered; guest call skipped");
            (selected.policy, report, applied)
        }
        None => {
            ctx.per_app.rendered.forget(&uid);
            render_and_apply(&ctx, &app, selected, key, &mut facts).await?
        }
    };
    let outcome = Outcome::Applied {
        deployment: applied.deployment.as_deref(),
        guest: policy.digest(),
    };
    let now = Timestamp::now();
    let desired = status::desired(&app, &outcome, now);
    let desired = status::with_guest(desired, &app, Some(&report.conditions), now);
    let held = ctx.per_app.settling.hold(
        &ObjectRef::from_obj(&*app),
        !applied.changes.is_empty(),
        status::progress(&desired),
        Instant::now(),
    );
    let write = async {
        match held {
            Some(left) => {
                debug!(?left, "rollout under way; status held back");
                Ok(())
            }
            None => write_status(&ctx, &app, &desired).await,
        }
    };
    // NB: the Events and the status are independent writes; send them at once.
    let ((), status) = tokio::join!(publish(&ctx, &app, &outcome, &facts), write);
    status?;
    ctx.per_app.forget_failures(&app);
    Ok(Action::requeue(held.unwrap_or(ctx.config.resync)))
}

/// The last render of the AppService `app` (with `uid`), with its children as they are, when
/// `key` is that render's and the children still hold what it applied
/// ([`apply::as_last_applied`]): the guest need not be called, nor anything applied.
fn unchanged(
    ctx: &Context,
    app: &AppService,
    uid: &str,
    key: guest::RenderKey,
) -> Option<(Arc<guest::Report>, Applied)> {
    let last = ctx.per_app.rendered.get(uid, key)?;
    let applied = apply::as_last_applied(&ctx.children, app, &last.children)?;
    Some((last.report.clone(), applied))
}

/// Renders `app` through `selected` ([`render`]) and applies and prunes its children; a failure
/// is reported ([`report_failure`]) and returned. A render by the selected guest, not its
/// fallback, is remembered under `key` for [`unchanged`]. Returns the guest that rendered, its
/// report and what the apply did.
async fn render_and_apply(
    ctx: &Context,
    app: &AppService,
    selected: swap::Selected,
    key: guest::RenderKey,
    facts: &mut Facts,
) -> Result<(guest::Policy, Arc<guest::Report>, Applied)> {
    let (policy, rendered) = render(ctx, app, selected, facts).await;
    Span::current().record("guest", field::display(policy.digest()));
    let guest::Rendering { objects, report } = match rendered {
        Ok(rendering) => rendering,
        Err(err) => {
            let outcome = match &err {
                guest::Error::Refused(refused) => {
                    ctx.metrics.output_refused(&refused.rules());
                    Outcome::OutputRefused {
                        message: refused.to_string(),
                    }
                }
                other => Outcome::GuestFailed {
                    reason: other.reason(),
                    message: error_chain(other),
                },
            };
            let error = Error::Guest(err);
            warn!(error = %error_chain(&error), "guest output not applied; children left untouched");
            report_failure(ctx, app, &outcome, facts, None).await;
            return Err(error);
        }
    };
    debug!(
        objects = objects.len(),
        conditions = report.conditions.len(),
        events = report.events.len(),
        "guest rendered"
    );
    let uid = app.uid().unwrap_or_default();
    facts.guest = ctx.per_app.guest_events.changed(&uid, &report.events);

    // NB: stamped in place; the guest's own output is not needed after this.
    let objects = stamp::children(app, policy.digest(), objects);
    let applied = match apply_and_prune(ctx, app, &objects).await {
        Ok(applied) => applied,
        Err(error) => {
            let outcome = Outcome::ApplyFailed {
                reason: error.reason(),
                message: error_chain(&error),
            };
            report_failure(ctx, app, &outcome, facts, Some(&report.conditions)).await;
            return Err(error);
        }
    };
    if !applied.changes.is_empty() || !applied.pruned.is_empty() {
        info!(changes = ?applied.changes, pruned = ?applied.pruned, "applied children");
    }
    facts.corrected = applied.with(Change::Corrected);
    facts.pruned = applied.pruned.clone();
    let report = Arc::new(report);
    // NB: without a uid (never from the API server) there is nothing to key the render by.
    if facts.rolled_back.is_none() && !uid.is_empty() {
        let ns = app.namespace().unwrap_or_default();
        let children = objects.iter().map(|object| {
            let kind = apply::ChildKind::of(&object.api_version, &object.kind)?;
            let key = (kind, ns.clone(), object.name.clone());
            let body = ctx.children.last_applied.body(&key)?;
            Some((key, body))
        });
        if let Some(children) = children.collect::<Option<Vec<_>>>() {
            let rendered = Rendered {
                key,
                children,
                report: report.clone(),
            };
            ctx.per_app.rendered.record(&uid, rendered);
        }
    }
    Ok((policy, report, applied))
}

/// Renders `app` through the guest `selected` for it; if that guest traps, hits a limit or emits
/// invalid output, through its fallback (the last good guest) instead, recorded in `facts`.
/// Returns the guest whose result is returned.
async fn render(
    ctx: &Context,
    app: &AppService,
    selected: swap::Selected,
    facts: &mut Facts,
) -> (guest::Policy, Result<guest::Rendering, guest::Error>) {
    let rendered = call(ctx, &selected.policy, app).await;
    let (Err(err), Some(fallback)) = (&rendered, selected.fallback) else {
        return (selected.policy, rendered);
    };
    if !err.warrants_fallback() {
        return (selected.policy, rendered);
    }
    let again = call(ctx, &fallback, app).await;
    if again.is_err() {
        return (selected.policy, rendered);
    }
    ctx.metrics.guest_rolled_back();
    warn!(
        failed = selected.policy.digest(),
        fallback = fallback.digest(),
        "guest failed; rolled back to the last good guest"
    );
    facts.rolled_back = Some(RolledBack {
        failed: selected.policy.digest().to_owned(),
        fallback: fallback.digest().to_owned(),
        error: error_chain(err),
    });
    (fallback, again)
}

/// One guest call, timed, its failure counted by kind.
async fn call(
    ctx: &Context,
    policy: &guest::Policy,
    app: &AppService,
) -> Result<guest::Rendering, guest::Error> {
    let rendered = {
        let _guest_timer = ctx.metrics.guest_call();
        policy.render_reported(app, ctx.namespace_level(app)).await
    };
    if let Err(err) = &rendered {
        ctx.metrics.guest_failed(err.kind());
    }
    rendered
}

/// Applies `stamped`, the guest's output stamped for `app`, and prunes the children it no
/// longer names.
async fn apply_and_prune(
    ctx: &Context,
    app: &AppService,
    stamped: &[DesiredObject],
) -> Result<Applied> {
    let mut applied = apply::apply_all(&ctx.client, &ctx.children, app, stamped).await?;
    applied.pruned = apply::prune(&ctx.client, &ctx.children, app, stamped).await?;
    Ok(applied)
}

/// Reports a failed reconcile: its Events, and its status, whose failure to write is logged, so
/// that the original error is the one returned. `conditions`: the guest's, when it rendered.
async fn report_failure(
    ctx: &Context,
    app: &AppService,
    outcome: &Outcome<'_>,
    facts: &Facts,
    conditions: Option<&[guest::Condition]>,
) {
    let now = Timestamp::now();
    let desired = status::with_guest(status::desired(app, outcome, now), app, conditions, now);
    let write = async {
        if let Err(err) = write_status(ctx, app, &desired).await {
            warn!(error = %error_chain(&err), "failed to write the status");
        }
    };
    tokio::join!(publish(ctx, app, outcome, facts), write);
}

/// Writes the status `desired`, unless it is what the AppService already reports.
async fn write_status(ctx: &Context, app: &AppService, desired: &AppServiceStatus) -> Result<()> {
    if !status::changed(app, desired) {
        return Ok(());
    }
    let name = app.name_any();
    let api: Api<AppService> =
        Api::namespaced(ctx.client.clone(), &app.namespace().unwrap_or_default());
    let patch = Patch::Apply(json!({
        "apiVersion": AppService::api_version(&()),
        "kind": AppService::kind(&()),
        "status": desired,
    }));
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // NB: `Api::patch_status` would parse the answer, the whole AppService with its
    // managedFields, into an object nobody reads; serde skips it instead.
    let written = async {
        let mut request = kube::core::Request::new(api.resource_url())
            .patch_subresource("status", &name, &params, &patch)
            .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("patch_status");
        ctx.client.request::<IgnoredAny>(request).await
    };
    written
        .await
        .map_err(|source| Error::Status { name, source })?;
    ctx.per_app.written.wrote(app, desired.clone());
    debug!(status = %status::summary(app, desired), "status written");
    Ok(())
}

/// Publishes the Events of a reconcile ([`events::derive`]) on the AppService. Failing to
/// publish is logged, never fatal.
async fn publish(ctx: &Context, app: &AppService, outcome: &Outcome<'_>, facts: &Facts) {
    let reference = app.object_ref(&());
    for event in events::derive(outcome, facts) {
        if let Err(err) = ctx.recorder.publish(&event, &reference).await {
            warn!(error = %err, reason = event.reason, "failed to publish an event");
        }
    }
}

#[cfg(test)]
mod tests;
