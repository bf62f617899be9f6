//! Running `kubectl` against the local control plane, as a user would.

use std::process::Command;

use anyhow::{Context, bail};

use crate::cluster::kubeconfig_path;

/// Runs `kubectl <args>` with the tests' kubeconfig and returns its stdout.
///
/// Uses `$CP_BIN/kubectl` (the control plane's own build, set by `hack/controlplane/env.sh`)
/// when present, else `kubectl` from `PATH`.
pub fn kubectl(args: &[&str]) -> anyhow::Result<String> {
    kubectl_with_stderr(args).map(|(stdout, _)| stdout)
}

fn command(args: &[&str]) -> anyhow::Result<std::process::Output> {
    let program = std::env::var_os("CP_BIN")
        .map(|dir| std::path::PathBuf::from(dir).join("kubectl"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "kubectl".into());
    Command::new(&program)
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .with_context(|| format!("failed to run {}", program.display()))
}

/// Runs `kubectl <args>` like [`kubectl`] and returns stdout and stderr (where kubectl prints
/// warnings, e.g. PodSecurity ones) of a successful run.
pub fn kubectl_with_stderr(args: &[&str]) -> anyhow::Result<(String, String)> {
    let output = command(args)?;
    if !output.status.success() {
        bail!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok((
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}
