//! One reconciliation: render the AppService through the guest, apply the children, prune the
//! ones no longer emitted, write the status and publish Events.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use tracing::{Span, debug, field, info, instrument, warn};

use super::Context;
use super::apply::{self, Applied};
use super::error::{Error, Result};
use super::status::{self, Outcome};
use crate::consts::FIELD_MANAGER;
use crate::crd::{AppService, AppServiceStatus};
use crate::error_chain;
use crate::guest::{self, DesiredObject};

/// Reconciles one AppService. The root span of everything the controller does for it.
///
/// A failing guest, or output the host refuses, leaves the children untouched: nothing is
/// applied or deleted, the failure is reported in the status (`GuestError`, reason
/// `OutputRefused` for a refusal) and as a Warning Event, and the error goes to
/// [`super::error_policy`] for a retry with backoff. So does a child that exists under another
/// controller (`ChildConflict`): nothing is adopted.
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
        return Ok(Action::await_change());
    }
    ctx.caches_synced().await;

    let (policy, rendered) = render(&ctx, &app).await;
    span.record("guest", field::display(policy.digest()));
    let objects = match rendered {
        Ok(objects) => objects,
        Err(err) => {
            let (event, outcome) = match &err {
                guest::Error::Refused(refused) => {
                    ctx.metrics.output_refused(&refused.rules());
                    let message = refused.to_string();
                    ("OutputRefused", Outcome::OutputRefused { message })
                }
                other => {
                    let reason = other.reason();
                    let message = error_chain(other);
                    ("GuestFailed", Outcome::GuestFailed { reason, message })
                }
            };
            let error = Error::Guest(err);
            let message = error_chain(&error);
            warn!(error = %message, "guest output not applied; children left untouched");
            publish(&ctx, &app, EventType::Warning, event, "Render", message).await;
            write_status_or_log(&ctx, &app, &outcome).await;
            return Err(error);
        }
    };
    debug!(objects = objects.len(), "guest rendered");

    let applied = match apply_and_prune(&ctx, &app, policy.digest(), &objects).await {
        Ok(applied) => applied,
        Err(error) => {
            let message = error_chain(&error);
            let reason = error.reason();
            let outcome = Outcome::ApplyFailed {
                reason,
                message: message.clone(),
            };
            publish(&ctx, &app, EventType::Warning, reason, "Apply", message).await;
            write_status_or_log(&ctx, &app, &outcome).await;
            return Err(error);
        }
    };
    let event = async {
        if !applied.changed.is_empty() {
            let note = format!("applied {}", applied.changed.join(", "));
            info!(changed = ?applied.changed, "applied children");
            publish(&ctx, &app, EventType::Normal, "Applied", "Apply", note).await;
        }
    };
    let outcome = Outcome::Applied {
        deployment: applied.deployment.as_ref(),
        guest: policy.digest(),
    };
    // NB: the Event and the status are independent writes; send them at once.
    let ((), status) = tokio::join!(event, write_status(&ctx, &app, &outcome));
    status?;
    ctx.forget_failures(&app);
    Ok(Action::requeue(ctx.config.resync))
}

/// Renders `app` through the guest selected for it; if that guest traps, hits a limit or emits
/// invalid output, through its fallback (the last good guest) instead, with a Warning Event.
/// Returns the guest whose result is returned.
async fn render(
    ctx: &Context,
    app: &AppService,
) -> (guest::Policy, Result<Vec<DesiredObject>, guest::Error>) {
    let selected = ctx.select(app);
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
    let note = format!(
        "guest {} failed ({}); rendered with the last good guest {}",
        selected.policy.digest(),
        error_chain(err),
        fallback.digest()
    );
    warn!(
        failed = selected.policy.digest(),
        fallback = fallback.digest(),
        "guest failed; rolled back to the last good guest"
    );
    publish(
        ctx,
        app,
        EventType::Warning,
        "GuestRolledBack",
        "Render",
        note,
    )
    .await;
    (fallback, again)
}

/// One guest call, timed, its failure counted by kind.
async fn call(
    ctx: &Context,
    policy: &guest::Policy,
    app: &AppService,
) -> Result<Vec<DesiredObject>, guest::Error> {
    let rendered = {
        let _guest_timer = ctx.metrics.guest_call();
        policy.render(app, ctx.namespace_level(app)).await
    };
    if let Err(err) = &rendered {
        ctx.metrics.guest_failed(err.kind());
    }
    rendered
}

async fn apply_and_prune(
    ctx: &Context,
    app: &AppService,
    digest: &str,
    objects: &[DesiredObject],
) -> Result<Applied> {
    let mut applied = apply::apply_all(&ctx.client, &ctx.children, app, digest, objects).await?;
    let pruned = apply::prune(&ctx.client, &ctx.children, app, objects).await?;
    if !pruned.is_empty() {
        let note = format!(
            "deleted {}, no longer rendered by the guest",
            pruned.join(", ")
        );
        publish(ctx, app, EventType::Normal, "Pruned", "Prune", note).await;
    }
    applied
        .changed
        .extend(pruned.into_iter().map(|p| format!("-{p}")));
    Ok(applied)
}

/// Writes the status of a failed reconcile; a failure to write is logged, so that the original
/// error is the one reported.
async fn write_status_or_log(ctx: &Context, app: &AppService, outcome: &Outcome<'_>) {
    if let Err(err) = write_status(ctx, app, outcome).await {
        warn!(error = %error_chain(&err), "failed to write the status");
    }
}

/// Writes the status computed for `outcome`, unless it is what the AppService already reports.
async fn write_status(ctx: &Context, app: &AppService, outcome: &Outcome<'_>) -> Result<()> {
    let desired: AppServiceStatus = status::desired(app, outcome, Timestamp::now());
    if !status::changed(app, &desired) {
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
    api.patch_status(&name, &params, &patch)
        .await
        .map_err(|source| Error::Status { name, source })?;
    debug!(status = %status::summary(app, &desired), "status written");
    Ok(())
}

/// Publishes an Event on the AppService. Failing to publish is logged, never fatal.
async fn publish(
    ctx: &Context,
    app: &AppService,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(truncate(note, 1000)),
        action: action.into(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&event, &app.object_ref(&())).await {
        warn!(error = %err, reason, "failed to publish an event");
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}
