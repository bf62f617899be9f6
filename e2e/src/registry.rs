//! A real OCI registry for the tests: the CNCF distribution registry with TLS (a CA made for the
//! test) and basic auth (an htpasswd user), started by `hack/registry.sh start-secure` in a state
//! directory of the test's own. Dropping it stops the registry.
//!
//! The registry and its htpasswd tool are the ones `hack/controlplane/build-imagetools.sh` builds
//! from Go modules (run by `hack/setup.sh`); a test that finds them unbuilt fails saying so
//! rather than building them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use app_operator::oci::{self, Credentials};

/// The hint every "no registry" failure carries.
const BUILD_HINT: &str = "run `hack/setup.sh` (it builds the registry from Go modules)";

/// A running registry. Its storage is under its state directory.
pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The CA certificate (PEM) the server certificate is signed by.
    pub ca: PathBuf,
    /// The user's name.
    pub user: String,
    /// The user's password.
    pub password: String,
    /// A docker config.json holding these credentials for `addr`.
    pub dockerconfig: PathBuf,
    state: PathBuf,
    /// The server's pid, as started: stopped on drop even when a test has removed the state
    /// directory (and its pid file) first.
    pid: Option<String>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hack/registry.sh")
}

/// The directory build-imagetools.sh builds the image tools into; fails unless it holds the
/// registry and htpasswd (and oras).
fn tools_dir() -> anyhow::Result<PathBuf> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hack/controlplane/lib.sh");
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#"source "$1" && cp_imagetools_dir"#)
        .arg("bash")
        .arg(&lib)
        .output()
        .with_context(|| format!("failed to run cp_imagetools_dir of {}", lib.display()))?;
    let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    for tool in ["registry", "htpasswd", "oras"] {
        if !output.status.success() || !dir.join(tool).is_file() {
            bail!("no {tool} in {}; {BUILD_HINT}", dir.display());
        }
    }
    Ok(dir)
}

impl Registry {
    /// Starts a registry with its state in `state` (created; a second start on the same
    /// directory keeps its storage, CA and user, on a new port).
    pub fn start(state: &Path) -> anyhow::Result<Self> {
        Self::start_on(state, None)
    }

    /// Stops the registry if it runs and starts it again on the same address, so that
    /// references pinned to it reach it; its storage, CA and user stay.
    pub fn restart(self) -> anyhow::Result<Self> {
        self.stop()?;
        let port = self.addr.rsplit_once(':').map(|(_, p)| p.to_owned());
        let state = self.state.clone();
        // NB: dropping `self` would stop the new process, which has the same state directory.
        std::mem::forget(self);
        Self::start_on(&state, port)
    }

    fn start_on(state: &Path, port: Option<String>) -> anyhow::Result<Self> {
        tools_dir()?;
        std::fs::create_dir_all(state)?;
        let mut command = Command::new(script());
        if let Some(port) = port {
            command.env("REGISTRY_PORT", port);
        }
        let output = command
            .arg("start-secure")
            .arg(state)
            .output()
            .context("failed to run hack/registry.sh")?;
        if !output.status.success() {
            bail!(
                "hack/registry.sh start-secure failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let fields: BTreeMap<String, String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let field = |key: &str| {
            fields
                .get(key)
                .cloned()
                .with_context(|| format!("hack/registry.sh printed no {key}="))
        };
        let read = |key: &str| -> anyhow::Result<String> {
            Ok(std::fs::read_to_string(field(key)?)?.trim().to_owned())
        };
        Ok(Self {
            addr: field("addr")?,
            ca: field("ca")?.into(),
            user: read("user")?,
            password: read("password")?,
            dockerconfig: field("dockerconfig")?.into(),
            state: state.to_owned(),
            pid: std::fs::read_to_string(state.join("pid"))
                .ok()
                .map(|p| p.trim().to_owned()),
        })
    }

    /// Stops the registry (its storage stays).
    pub fn stop(&self) -> anyhow::Result<()> {
        let status = Command::new(script())
            .arg("stop")
            .arg(&self.state)
            .status()
            .context("failed to run hack/registry.sh stop")?;
        if !status.success() {
            bail!("hack/registry.sh stop failed");
        }
        Ok(())
    }

    /// `oras ARGS` (the OCI artifact CLI, built with the registry) with this registry's CA and
    /// user, run in `dir`; its stdout, or an error with its stderr.
    pub fn oras(&self, dir: &Path, args: &[&str]) -> anyhow::Result<String> {
        let ca = self.ca.display().to_string();
        let auth = ["--ca-file", &ca, "-u", &self.user, "-p", &self.password];
        let output = Command::new(tools_dir()?.join("oras"))
            .args(args)
            .args(auth)
            .current_dir(dir)
            .output()
            .context("failed to run oras")?;
        if !output.status.success() {
            bail!(
                "oras {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The credentials of its user.
    pub fn credentials(&self) -> anyhow::Result<Credentials> {
        Ok(Credentials::from_file(&self.dockerconfig)?)
    }

    /// A client with its CA and user, and `limits`.
    pub fn client(&self, limits: oci::Limits) -> anyhow::Result<oci::Registry> {
        Ok(oci::Registry::new(oci::client::Options {
            credentials: self.credentials()?,
            ca_file: Some(self.ca.clone()),
            limits,
        })?)
    }

    /// The file the registry stores blob `digest` in: overwrite it to tamper with the blob.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.state
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.stop();
        // NB: without its state directory `stop` finds no pid file; end the process started.
        if let Some(pid) = &self.pid
            && std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmd| cmd.contains("registry"))
        {
            let _ = Command::new("kill").arg(pid).status();
        }
    }
}
