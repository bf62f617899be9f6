//! `app-operator render`: an AppService file through a guest, printed as the controller would
//! apply it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::crd::AppService;
use crate::guest::{self, DesiredObject};
use crate::validation::Validator;
use crate::{Error, Result, consts, stamp};

/// Arguments of `app-operator render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The AppService manifest (one YAML document); `-` reads standard input.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    /// A guest component (`.wasm`), or a reference pinned by digest
    /// (`registry/repository@sha256:<hex>`, pulled and verified), to use instead of the embedded
    /// default guest.
    #[arg(long)]
    pub guest: Option<PathBuf>,
    /// Directory for precompiled guests; unset compiles in memory every run.
    #[arg(long, env = "APP_OPERATOR_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The output policy, as the operator's flags set it.
    #[command(flatten)]
    pub policy: super::PolicyArgs,
    /// How to reach the registry, for a guest given by reference.
    #[command(flatten)]
    pub registry: super::registry::RegistryArgs,
}

/// Runs the subcommand: prints multi-document YAML on stdout, and what a 0.2.0 guest reports
/// besides (the conditions it would merge into the status, the Events it would record) on
/// stderr, so the YAML stays fit for `kubectl apply`.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let app = read_app(&args.file)?;
    let policy = local_policy(
        args.cache_dir,
        &args.policy,
        args.guest.as_deref(),
        &args.registry,
    )
    .await?;
    let (yaml, report) = render_reported(&policy, &app).await?;
    print!("{yaml}");
    for line in report_lines(&report) {
        eprintln!("{line}");
    }
    Ok(())
}

/// `# condition TYPE=STATUS REASON: message` and `# event TYPE REASON: note` lines for what a
/// guest reported besides its objects; none for a 0.1.0 guest.
pub fn report_lines(report: &guest::report::Report) -> Vec<String> {
    let conditions = report.conditions.iter().map(|c| {
        format!(
            "# condition {}={:?} {}: {}",
            c.type_, c.status, c.reason, c.message
        )
    });
    let events = report
        .events
        .iter()
        .map(|e| format!("# event {:?} {}: {}", e.type_, e.reason, e.note));
    conditions.chain(events).collect()
}

/// The guest of a local subcommand (`render`, `guest test`): `guest` (a file, `-` for stdin, or
/// a pinned reference, pulled and verified) or the embedded default guest, loaded in a runtime
/// with the operator's output policy `policy` and the precompiled cache `cache_dir`.
pub async fn local_policy(
    cache_dir: Option<PathBuf>,
    policy: &super::PolicyArgs,
    guest: Option<&Path>,
    registry: &super::registry::RegistryArgs,
) -> Result<guest::Policy> {
    let config = guest::Config {
        cache_dir,
        output: policy.config(),
        ..guest::Config::default()
    };
    let runtime = guest::Runtime::new(config)?;
    Ok(match guest {
        Some(path) => {
            let wasm = super::registry::read_guest(path, registry).await?;
            runtime.load(wasm).await?
        }
        None => runtime.load_default().await?,
    })
}

/// Renders `app` through `policy` and stamps the result: the YAML `render` prints. With no
/// cluster to read a namespace from, the configured Pod Security level applies alone.
pub async fn render(policy: &guest::Policy, app: &AppService) -> Result<String> {
    Ok(render_reported(policy, app).await?.0)
}

/// [`render`], and what the guest reported besides its objects.
pub async fn render_reported(
    policy: &guest::Policy,
    app: &AppService,
) -> Result<(String, guest::report::Report)> {
    let rendering = policy.render_reported(app, None).await?;
    let objects = stamp::children(app, policy.digest(), rendering.objects);
    Ok((to_yaml(app, policy.digest(), &objects)?, rendering.report))
}

/// Parses an AppService manifest, checking its apiVersion and kind, and validates it as the API
/// server would ([`Validator::app_service`]): the AppService returned is the one the cluster
/// would store, with the CRD's defaults applied.
pub fn read_app(path: &Path) -> Result<AppService> {
    let text = String::from_utf8_lossy(&super::read(path)?).into_owned();
    let what = path.display().to_string();
    let yaml = |source| Error::Yaml {
        what: what.clone(),
        source,
    };
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).map_err(yaml)?;
    let field = |key: &str| {
        value
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version != consts::OWNER_API_VERSION || kind != consts::OWNER_KIND {
        return Err(Error::Input(format!(
            "{what} is {api_version:?} {kind:?}, not an {} {}",
            consts::OWNER_API_VERSION,
            consts::OWNER_KIND
        )));
    }
    let object = serde_json::to_value(&value).map_err(|e| Error::Input(format!("{what}: {e}")))?;
    let stored = Validator::app_service()
        .validate(&object)
        .map_err(|source| Error::InvalidApp {
            what: what.clone(),
            source,
        })?;
    serde_json::from_value(stored).map_err(|e| Error::Input(format!("{what}: {e}")))
}

/// The stamped objects as multi-document YAML, headed by comments on how they were made.
pub fn to_yaml(app: &AppService, digest: &str, objects: &[DesiredObject]) -> Result<String> {
    let mut out = format!("# Rendered by guest {digest}.\n");
    if app.metadata.uid.is_none() {
        let name = app.metadata.name.as_deref().unwrap_or_default();
        let _ = writeln!(
            out,
            "# NB: the input has no metadata.uid, so no ownerReference is stamped. The controller \
             sets one\n# (AppService {name}, controller: true, blockOwnerDeletion: true) from the \
             live object."
        );
    }
    for o in objects {
        let doc = serde_yaml_ng::to_string(&o.body).map_err(|source| Error::Yaml {
            what: format!("{}/{}", o.kind, o.name),
            source,
        })?;
        out.push_str("---\n");
        out.push_str(&doc);
    }
    Ok(out)
}
