//! `app-operator guest push`: puts a guest into the guest ConfigMap through the API, as the
//! stable guest or as a canary for the AppServices a label selector matches, with its
//! signature when one is given.

mod to_registry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, ResourceExt};

use super::Connection;
use crate::consts::{
    ANNOTATION_CANARY_PIN, ANNOTATION_CANARY_SELECTOR, ANNOTATION_GUEST_ACTIVE,
    ANNOTATION_GUEST_CANARY, ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_PIN,
    ANNOTATION_GUEST_STATE, CANARY_KEY, CANARY_SIGNATURE_KEY, GUEST_CONFIGMAP, GUEST_KEY,
    GUEST_SIGNATURE_KEY,
};
use crate::swap::trust::Signature;
use crate::swap::{pin, selector};
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
    /// Also pin the guest's sha256 (annotation `apps.kudevops.io/guest-sha256`, or
    /// `apps.kudevops.io/canary-sha256` with `--canary`), moving a pin already there. Without
    /// it, a guest that does not match the ConfigMap's pin for its role is not pushed.
    #[arg(long)]
    pub pin: bool,
    /// Sign the guest with this Ed25519 private key (PKCS#8 PEM) and push the signature beside
    /// it (key `guest.wasm.sig`, or `canary.wasm.sig`), as an operator run with
    /// `--guest-trusted-key` requires. Without a signature, any previous one of that role is
    /// removed.
    #[arg(long, value_name = "KEY.pem", conflicts_with = "signature")]
    pub sign_key: Option<PathBuf>,
    /// Push this signature file (made by `app-operator guest sign`) beside the guest.
    #[arg(long, value_name = "FILE.sig")]
    pub signature: Option<PathBuf>,
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
    /// Push the component to this OCI registry repository and tag (`registry/repository:tag`)
    /// as a wasm OCI artifact, and put its digest reference (`guest.ref`, or `canary.ref`) in
    /// the ConfigMap instead of the bytes.
    #[arg(long, value_name = "REGISTRY/REPOSITORY:TAG")]
    pub to: Option<String>,
    /// How to reach the registry, with `--to`.
    #[command(flatten)]
    pub registry: super::registry::RegistryArgs,
    /// Which cluster to connect to.
    #[command(flatten)]
    pub connection: Connection,
}

/// Most bytes of `data` and `binaryData` a ConfigMap may hold: the API server refuses more
/// (counted before base64, which makes the stored object about 4/3 of it).
const CONFIGMAP_MAX_BYTES: usize = 1 << 20;

/// Runs the subcommand.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let wasm = super::read(&args.file)?;
    // NB: before connecting, so nothing is written. With `--to` only a reference goes in.
    if args.to.is_none()
        && let Some(problem) = too_big(&args.file, wasm.len(), wasm.len())
    {
        return Err(Error::Input(problem));
    }
    let digest = crate::guest::digest(&wasm);
    if let Some(text) = &args.canary {
        selector::parse(text).map_err(|e| Error::Input(e.to_string()))?;
    }
    let signature = match (&args.sign_key, &args.signature) {
        (Some(key), _) => Some(super::sign::sign_with(key, &wasm)?),
        (None, Some(file)) => Some(read_signature(file)?),
        (None, None) => None,
    };
    let reference = to_registry::upload(&args, &wasm).await?;
    let client = args.connection.client(None).await?;
    let ns = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let name = &args.configmap;
    let existing = api.get_opt(name).await.map_err(Error::GuestSource)?;
    if !args.pin
        && let Some(problem) = stale_pin(existing.as_ref(), args.canary.is_some(), &digest)
    {
        return Err(Error::Input(format!("ConfigMap {ns}/{name} {problem}")));
    }
    let size = wasm.len();
    let mut cm = update(
        existing.clone().unwrap_or_else(|| empty(name)),
        &args,
        wasm,
        &digest,
        signature.as_ref(),
    );
    to_registry::place(&mut cm, args.canary.is_some(), reference.as_ref());
    if let Some(problem) = too_big(&args.file, size, data_bytes(&cm)) {
        return Err(Error::Input(format!("ConfigMap {ns}/{name}: {problem}")));
    }
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
    let signed = if signature.is_some() { ", signed," } else { "" };
    let by = reference.map_or_else(String::new, |r| format!(" by reference {r}"));
    println!("pushed {digest}{signed}{by} as the {role} guest to ConfigMap {ns}/{name}");
    if args.wait > 0 {
        wait(&api, name, &digest, role, Duration::from_secs(args.wait)).await?;
    }
    Ok(())
}

/// Why a guest of `size` bytes cannot go into a ConfigMap that would then hold `total` bytes
/// of data, if it cannot.
fn too_big(file: &Path, size: usize, total: usize) -> Option<String> {
    if total <= CONFIGMAP_MAX_BYTES {
        return None;
    }
    let mib = |n: usize| n as f64 / f64::from(1 << 20);
    let what = if total == size {
        format!("{} is {size} bytes ({:.1} MiB)", file.display(), mib(size))
    } else {
        format!(
            "{} ({size} bytes) would bring the ConfigMap's data to {total} bytes",
            file.display()
        )
    };
    Some(format!(
        "{what}, too big for the guest ConfigMap: a ConfigMap holds at most 1 MiB \
         ({CONFIGMAP_MAX_BYTES} bytes of data, before base64). Nothing was written. Push it to an OCI registry instead: \
         `--to REGISTRY/REPOSITORY:TAG` puts only its digest reference in the ConfigMap"
    ))
}

/// Bytes of a ConfigMap's `data` and `binaryData`, as the API server counts them.
fn data_bytes(cm: &ConfigMap) -> usize {
    let data = cm.data.iter().flatten().map(|(k, v)| k.len() + v.len());
    let binary = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.0.len());
    data.chain(binary).sum()
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

/// The signature in file `path`, checked to be one before it is pushed.
fn read_signature(path: &Path) -> Result<Signature> {
    let text = super::read(path)?;
    Signature::parse(&text).map_err(|source| Error::SignatureFile {
        path: path.to_owned(),
        source,
    })
}

/// What is wrong with pushing a guest of digest `digest` (as the canary when `canary`) to
/// ConfigMap `cm` without moving its pin: the pin the ConfigMap sets for that role, if it is
/// another digest. The operator would reject the guest; say so before pushing it.
fn stale_pin(cm: Option<&ConfigMap>, canary: bool, digest: &str) -> Option<String> {
    let (key, role) = if canary {
        (ANNOTATION_CANARY_PIN, "canary")
    } else {
        (ANNOTATION_GUEST_PIN, "stable")
    };
    let pin = cm?.annotations().get(key)?;
    let pinned = pin::normalize(pin);
    (pinned != digest).then(|| {
        format!(
            "pins the {role} guest to {pinned} (annotation {key}), and this guest is {digest}: \
             push with --pin to move the pin, or remove the annotation"
        )
    })
}

/// The ConfigMap with the guest and its signature put in place (a guest pushed without one
/// loses the previous guest's); the operator's status annotations are cleared so that the next
/// ones are about this guest.
fn update(
    mut cm: ConfigMap,
    args: &Args,
    wasm: Vec<u8>,
    digest: &str,
    signature: Option<&Signature>,
) -> ConfigMap {
    let data = cm.binary_data.get_or_insert_with(BTreeMap::new);
    let annotations = cm.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.remove(ANNOTATION_GUEST_STATE);
    annotations.remove(ANNOTATION_GUEST_MESSAGE);
    let signature_key = if args.canary.is_some() {
        CANARY_SIGNATURE_KEY
    } else {
        GUEST_SIGNATURE_KEY
    };
    match signature {
        Some(signature) => data.insert(signature_key.into(), ByteString(signature.to_file())),
        None => data.remove(signature_key),
    };
    match &args.canary {
        Some(selector) => {
            data.insert(CANARY_KEY.into(), ByteString(wasm));
            annotations.insert(ANNOTATION_CANARY_SELECTOR.into(), selector.clone());
            if args.pin {
                annotations.insert(ANNOTATION_CANARY_PIN.into(), digest.to_owned());
            }
        }
        None => {
            data.insert(GUEST_KEY.into(), ByteString(wasm));
            data.remove(CANARY_KEY);
            data.remove(CANARY_SIGNATURE_KEY);
            annotations.remove(ANNOTATION_CANARY_SELECTOR);
            annotations.remove(ANNOTATION_CANARY_PIN);
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

#[cfg(test)]
mod tests {
    use clap::Parser;
    use k8s_openapi::ByteString;

    use std::collections::BTreeMap;
    use std::path::Path;

    use super::{Args, CONFIGMAP_MAX_BYTES, data_bytes, empty, stale_pin, too_big, update};
    use crate::cli::{Cli, Command, GuestCommand};
    use crate::swap::trust::{self, Signature};

    fn args(line: &[&str]) -> Args {
        let cli = Cli::try_parse_from([&["app-operator", "guest", "push"], line].concat())
            .expect("the flags parse");
        match cli.command {
            Command::Guest(GuestCommand::Push(args)) => args,
            other => panic!("not push: {other:?}"),
        }
    }

    fn signature(wasm: &[u8]) -> Signature {
        let pem = include_str!("../../tests/fixtures/keys/trusted.key.pem");
        trust::sign(pem, wasm).expect("the fixture key signs")
    }

    fn keys(cm: &k8s_openapi::api::core::v1::ConfigMap) -> Vec<&str> {
        cm.binary_data
            .iter()
            .flat_map(|d| d.keys())
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn a_signature_goes_beside_its_guest_and_a_stale_one_goes() {
        let stable = signature(b"stable");
        let cm = update(
            empty("g"),
            &args(&["a.wasm"]),
            b"stable".to_vec(),
            "d",
            Some(&stable),
        );
        assert_eq!(keys(&cm), ["guest.wasm", "guest.wasm.sig"]);
        let data = cm.binary_data.as_ref().expect("binaryData");
        assert_eq!(data["guest.wasm.sig"], ByteString(stable.to_file()));

        let canary = signature(b"canary");
        let line = ["b.wasm", "--canary", "track=canary"];
        let cm = update(cm, &args(&line), b"canary".to_vec(), "d", Some(&canary));
        assert_eq!(
            keys(&cm),
            [
                "canary.wasm",
                "canary.wasm.sig",
                "guest.wasm",
                "guest.wasm.sig"
            ]
        );

        // An unsigned canary drops the canary's stale signature, not the stable guest's.
        let cm = update(cm, &args(&line), b"other".to_vec(), "d", None);
        assert_eq!(keys(&cm), ["canary.wasm", "guest.wasm", "guest.wasm.sig"]);

        // Promoting a signed canary, unsigned: both signatures go with the canary.
        let cm = update(cm, &args(&line), b"canary".to_vec(), "d", Some(&canary));
        let cm = update(cm, &args(&["b.wasm"]), b"canary".to_vec(), "d", None);
        assert_eq!(keys(&cm), ["guest.wasm"]);
    }

    #[test]
    fn a_guest_too_big_for_a_configmap_is_refused_with_the_reason() {
        let file = Path::new("py.wasm");
        assert_eq!(too_big(file, 100_000, 100_000), None);
        assert_eq!(
            too_big(file, CONFIGMAP_MAX_BYTES, CONFIGMAP_MAX_BYTES),
            None
        );
        let alone = too_big(file, 18_454_145, 18_454_145).expect("18 MB is too big");
        assert!(
            alone.starts_with("py.wasm is 18454145 bytes (17.6 MiB), too big"),
            "{alone}"
        );
        assert!(alone.contains("at most 1 MiB"), "{alone}");
        assert!(alone.contains("Nothing was written"), "{alone}");
        assert!(alone.contains("OCI registry"), "{alone}");
        // A canary that fits alone but not beside the stable guest.
        let beside = too_big(file, 600_000, 1_200_000).expect("the sum is too big");
        assert!(
            beside.starts_with(
                "py.wasm (600000 bytes) would bring the ConfigMap's data to 1200000 bytes"
            ),
            "{beside}"
        );
    }

    #[test]
    fn the_configmap_size_counts_keys_and_raw_bytes() {
        let mut cm = empty("g");
        cm.binary_data = Some(BTreeMap::from([(
            "guest.wasm".to_owned(),
            ByteString(vec![0; 1000]),
        )]));
        cm.data = Some(BTreeMap::from([("note".to_owned(), "abc".to_owned())]));
        assert_eq!(data_bytes(&cm), 10 + 1000 + 4 + 3);
    }

    #[test]
    fn a_key_and_a_signature_file_exclude_each_other() {
        let both = ["a.wasm", "--sign-key", "k.pem", "--signature", "a.wasm.sig"];
        let line = [&["app-operator", "guest", "push"][..], &both].concat();
        assert!(Cli::try_parse_from(line).is_err());
        assert!(args(&["a.wasm", "--sign-key", "k.pem"]).sign_key.is_some());
    }

    #[test]
    fn a_push_that_the_pin_would_reject_is_refused_before_it_is_written() {
        let mut cm = empty("g");
        cm.metadata.annotations = Some(
            [
                ("apps.kudevops.io/guest-sha256".to_owned(), "AAA".to_owned()),
                (
                    "apps.kudevops.io/canary-sha256".to_owned(),
                    "sha256:ccc".to_owned(),
                ),
            ]
            .into(),
        );
        assert_eq!(stale_pin(None, false, "sha256:x"), None);
        assert_eq!(stale_pin(Some(&cm), false, "sha256:aaa"), None);
        assert_eq!(stale_pin(Some(&cm), true, "sha256:ccc"), None);
        let stale = stale_pin(Some(&cm), true, "sha256:x").expect("another canary");
        assert!(
            stale.starts_with(
                "pins the canary guest to sha256:ccc (annotation apps.kudevops.io/canary-sha256)"
            ),
            "{stale}"
        );
        assert!(stale_pin(Some(&cm), false, "sha256:ccc").is_some());
    }

    #[test]
    fn pin_moves_the_pin_of_the_role_pushed() {
        let cm = update(
            empty("g"),
            &args(&["a.wasm", "--pin"]),
            b"a".to_vec(),
            "sha256:a",
            None,
        );
        let line = ["b.wasm", "--canary", "track=canary", "--pin"];
        let cm = update(cm, &args(&line), b"b".to_vec(), "sha256:b", None);
        let annotations = cm.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations["apps.kudevops.io/guest-sha256"], "sha256:a");
        assert_eq!(annotations["apps.kudevops.io/canary-sha256"], "sha256:b");
        // Promoting removes the canary and its pin.
        let cm = update(cm, &args(&["b.wasm"]), b"b".to_vec(), "sha256:b", None);
        let annotations = cm.metadata.annotations.unwrap_or_default();
        assert!(!annotations.contains_key("apps.kudevops.io/canary-sha256"));
        assert_eq!(annotations["apps.kudevops.io/guest-sha256"], "sha256:a");
    }
}
