//! `app-operator guest push`: puts a guest into the guest ConfigMap through the API, as the
//! stable guest or as a canary for the AppServices a label selector matches.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, ResourceExt};

use super::Connection;
use crate::consts::{
    ANNOTATION_CANARY_SELECTOR, ANNOTATION_GUEST_ACTIVE, ANNOTATION_GUEST_CANARY,
    ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_PIN, ANNOTATION_GUEST_STATE, CANARY_KEY,
    GUEST_CONFIGMAP, GUEST_KEY,
};
use crate::swap::selector;
use crate::{Error, Result};

/// Arguments of `app-operator guest push`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The guest component (`.wasm`).
    pub file: PathBuf,
    /// Push as a canary for the AppServices this label selector matches (`key=value,...`),
    /// keeping the stable guest. Without it the file becomes the stable guest and any canary
    /// is removed (which is how a canary is promoted: push it again without `--canary`).
    #[arg(long)]
    pub canary: Option<String>,
    /// Also pin the stable guest's sha256 (annotation `apps.kudevops.io/guest-sha256`).
    #[arg(long, conflicts_with = "canary")]
    pub pin: bool,
    /// Name of the guest ConfigMap.
    #[arg(long, env = "APP_OPERATOR_GUEST_CONFIGMAP", default_value = GUEST_CONFIGMAP)]
    pub configmap: String,
    /// Namespace of the guest ConfigMap (the operator's). Default: the context's namespace.
    #[arg(long, short = 'n', env = "APP_OPERATOR_GUEST_CONFIGMAP_NAMESPACE")]
    pub namespace: Option<String>,
    /// Wait up to this many seconds for the operator to accept or reject the guest; 0 does
    /// not wait.
    #[arg(long, default_value_t = 30)]
    pub wait: u64,
    /// Which cluster to connect to.
    #[command(flatten)]
    pub connection: Connection,
}

/// Runs the subcommand.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let wasm = super::render::read(&args.file)?;
    let digest = crate::guest::digest(&wasm);
    if let Some(text) = &args.canary {
        selector::parse(text).map_err(|e| Error::Input(e.to_string()))?;
    }
    let client = args.connection.client(None).await?;
    let ns = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let name = &args.configmap;
    let existing = api.get_opt(name).await.map_err(Error::GuestSource)?;
    let cm = update(
        existing.clone().unwrap_or_else(|| empty(name)),
        &args,
        wasm,
        &digest,
    );
    let written = match existing {
        Some(_) => api.replace(name, &PostParams::default(), &cm).await,
        None => api.create(&PostParams::default(), &cm).await,
    };
    written.map_err(Error::GuestSource)?;
    let role = if args.canary.is_some() {
        "canary"
    } else {
        "stable"
    };
    println!("pushed {digest} as the {role} guest to ConfigMap {ns}/{name}");
    if args.wait > 0 {
        wait(&api, name, &digest, role, Duration::from_secs(args.wait)).await?;
    }
    Ok(())
}

fn empty(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// The ConfigMap with the guest put in place; the operator's status annotations are cleared so
/// that the next ones are about this guest.
fn update(mut cm: ConfigMap, args: &Args, wasm: Vec<u8>, digest: &str) -> ConfigMap {
    let data = cm.binary_data.get_or_insert_with(BTreeMap::new);
    let annotations = cm.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.remove(ANNOTATION_GUEST_STATE);
    annotations.remove(ANNOTATION_GUEST_MESSAGE);
    match &args.canary {
        Some(selector) => {
            data.insert(CANARY_KEY.into(), ByteString(wasm));
            annotations.insert(ANNOTATION_CANARY_SELECTOR.into(), selector.clone());
        }
        None => {
            data.insert(GUEST_KEY.into(), ByteString(wasm));
            data.remove(CANARY_KEY);
            annotations.remove(ANNOTATION_CANARY_SELECTOR);
            if args.pin {
                annotations.insert(ANNOTATION_GUEST_PIN.into(), digest.to_owned());
            }
        }
    }
    cm
}

/// Polls the operator's status annotations until the guest is in force or rejected.
async fn wait(
    api: &Api<ConfigMap>,
    name: &str,
    digest: &str,
    role: &str,
    timeout: Duration,
) -> Result<()> {
    let start = Instant::now();
    let in_force = if role == "canary" {
        ANNOTATION_GUEST_CANARY
    } else {
        ANNOTATION_GUEST_ACTIVE
    };
    while start.elapsed() < timeout {
        if let Some(cm) = api.get_opt(name).await.map_err(Error::GuestSource)? {
            let a = cm.annotations();
            if a.get(in_force).map(String::as_str) == Some(digest) {
                println!("the operator put {digest} in force as the {role} guest");
                return Ok(());
            }
            if a.get(ANNOTATION_GUEST_STATE).map(String::as_str) == Some("Rejected") {
                let why = a.get(ANNOTATION_GUEST_MESSAGE).cloned().unwrap_or_default();
                return Err(Error::Input(format!(
                    "the operator rejected the guest: {why}"
                )));
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(Error::Input(format!(
        "no answer from the operator within {timeout:?} (is it running and watching ConfigMap {name}?)"
    )))
}
