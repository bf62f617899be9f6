//! From guest bytes to a pre-linked component: digest, load the artifact precompiled ahead of
//! time or cached on disk, or compile (in a child process when configured, [`super::compiler`]),
//! then link the `host` import and the locked-down WASI when the guest imports it.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};
use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

use super::bindings::{AppservicePolicy, AppservicePolicyPre, v0_2};
use super::compiler::{self, ChildError};
use super::state::State;
use super::{BoxError, Config, Error, engine, wasi};

/// `sha256:<hex>` of the bytes: a guest's identity in status, annotations and metrics.
pub fn digest(wasm: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(wasm)))
}

/// Loads the artifact precompiled for this engine from [`Config::precompiled_dir`] or
/// [`Config::cache_dir`], else compiles `wasm` ([`Config::compiler`]: in a child process, else
/// here) and keeps the artifact in the cache. A directory that cannot be read or written only
/// costs a compile; it is never an error.
pub(super) fn compile(
    engine: &Engine,
    config: &Config,
    wasm: &[u8],
    digest: &str,
) -> Result<Component, Error> {
    if let Some(dir) = config.precompiled_dir.as_deref() {
        match load(engine, dir, digest) {
            Some(component) => return Ok(component),
            None => info!(
                digest,
                dir = %dir.display(),
                "guest not precompiled for this engine; compiling it"
            ),
        }
    }
    if let Some(component) = config
        .cache_dir
        .as_deref()
        .and_then(|dir| load(engine, dir, digest))
    {
        return Ok(component);
    }
    let component = match &config.compiler {
        Some(program) => compile_in_child(engine, program, config, wasm, digest)?,
        None => None,
    };
    let component = match component {
        Some(component) => component,
        None => compile_here(engine, wasm, digest)?,
    };
    if let Some(dir) = config.cache_dir.as_deref() {
        let path = artifact_path(engine, dir, digest);
        if let Err(e) = store_artifact(&component, &path) {
            warn!(digest, path = %path.display(), error = %e, "failed to cache the precompiled guest");
        }
    }
    Ok(component)
}

/// The artifact of `digest` for this engine in `dir`, if there is a usable one.
fn load(engine: &Engine, dir: &Path, digest: &str) -> Option<Component> {
    let path = artifact_path(engine, dir, digest);
    if !path.is_file() {
        return None;
    }
    match fs::read(&path)
        .map_err(BoxError::from)
        .and_then(|bytes| deserialize(engine, &bytes))
    {
        Ok(component) => {
            debug!(digest, path = %path.display(), "loaded precompiled guest");
            Some(component)
        }
        Err(e) => {
            warn!(digest, path = %path.display(), error = %e, "ignoring unusable precompiled guest");
            None
        }
    }
}

/// Compiles `wasm` for `engine`, checks it links as a guest ([`link`]), and writes the artifact
/// where [`compile`] looks for it in `dir`; returns its path.
pub(super) fn precompile(
    engine: &Engine,
    dir: &Path,
    wasm: &[u8],
    digest: &str,
) -> Result<PathBuf, Error> {
    let component = compile_here(engine, wasm, digest)?;
    link(engine, &component, digest)?;
    let path = artifact_path(engine, dir, digest);
    store_artifact(&component, &path).map_err(|source| Error::Precompile {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Compiles `wasm` in this process.
fn compile_here(engine: &Engine, wasm: &[u8], digest: &str) -> Result<Component, Error> {
    let component = Component::new(engine, wasm).map_err(|e| Error::Load {
        digest: digest.into(),
        source: e.into(),
    });
    // NB: a compile frees most of what it allocated, on Cranelift's threads.
    crate::heap::trim();
    component
}

/// Compiles `wasm` by running `program` ([`compiler::in_child`]). `None` when the child could
/// not do it for a reason of its own (it could not start, or its artifact does not fit this
/// engine): the caller compiles here instead. An invalid component, or a compile the child did
/// not survive, is an error: a compile here would fail the same way, or worse.
fn compile_in_child(
    engine: &Engine,
    program: &Path,
    config: &Config,
    wasm: &[u8],
    digest: &str,
) -> Result<Option<Component>, Error> {
    let load_error = |e: ChildError| Error::Load {
        digest: digest.into(),
        source: e.into(),
    };
    let artifact = match compiler::in_child(program, config, wasm) {
        Ok(artifact) => artifact,
        Err(e @ ChildError::Unavailable(_)) => {
            warn!(digest, program = %program.display(), error = %e, "compiling the guest in this process");
            return Ok(None);
        }
        Err(e) => return Err(load_error(e)),
    };
    match deserialize(engine, &artifact) {
        Ok(component) => {
            debug!(
                digest,
                bytes = artifact.len(),
                "compiled the guest in a child process"
            );
            Ok(Some(component))
        }
        Err(e) => {
            warn!(digest, error = %e, "the child's artifact does not fit this engine; compiling the guest in this process");
            Ok(None)
        }
    }
}

/// A guest pre-linked for the contract version it exports.
pub(super) enum Pre {
    /// `kudevops:appservice@0.1.x`: objects only.
    V0_1(AppservicePolicyPre<State>),
    /// `kudevops:appservice@0.2.x`: objects, conditions and Events.
    V0_2(v0_2::AppservicePolicyPre<State>),
}

/// Links the contract's import (of the version the component exports: 0.2 when it exports
/// `policy@0.2.x`, else 0.1) and, if the component imports any WASI, the locked-down WASI, then
/// checks the component exports the contract. A component that imports anything else fails to
/// load, naming the import.
pub(super) fn link(engine: &Engine, component: &Component, digest: &str) -> Result<Pre, Error> {
    let load_error = |e: wasmtime::Error| Error::Load {
        digest: digest.into(),
        source: e.into(),
    };
    let v0_2 = component
        .component_type()
        .exports(engine)
        .any(|(name, _)| name.starts_with(v0_2::EXPORT_PREFIX));
    let mut linker = Linker::<State>::new(engine);
    if v0_2 {
        v0_2::AppservicePolicy::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            .map_err(load_error)?;
    } else {
        AppservicePolicy::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            .map_err(load_error)?;
    }
    // NB: a Rust std guest imports WASI (environment, stdio, exit) even when it never calls it
    // (the default guest resolves those imports to traps, guest/src/no_wasi.rs);
    // CPython and SpiderMonkey call it at start-up. What it grants: `wasi.rs`. No trap stubs
    // for the rest: `define_unknown_imports_as_traps` defines an import's exact version, say
    // `wasi:io/poll@0.2.9`, which then shadows the semver-compatible `@0.2.12` linked here.
    if wasi::imported(engine, component) {
        wasi::add_to_linker(&mut linker).map_err(load_error)?;
    }
    let pre = linker.instantiate_pre(component).map_err(load_error)?;
    if v0_2 {
        v0_2::AppservicePolicyPre::new(pre)
            .map(Pre::V0_2)
            .map_err(load_error)
    } else {
        AppservicePolicyPre::new(pre)
            .map(Pre::V0_1)
            .map_err(load_error)
    }
}

/// `<cache_dir>/<hex>-<engine hash>.cwasm`: one artifact per guest and engine configuration.
fn artifact_path(engine: &Engine, dir: &Path, digest: &str) -> PathBuf {
    // NB: `deserialize` itself rejects an incompatible artifact, should two engines' numbers
    // collide.
    let hex = digest.trim_start_matches("sha256:");
    dir.join(format!(
        "{hex}-{:016x}.cwasm",
        engine::compatibility(engine)
    ))
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, bytes: &[u8]) -> Result<Component, BoxError> {
    // NB: the cache file is read into memory rather than mapped (`deserialize_file`): one
    // truncated while mapped (by hand, or another tool) would SIGBUS the operator. It costs
    // ~0.1 ms per load.
    // SAFETY: the bytes are an artifact this host's binary serialized: from the precompiled
    // directory (`Config::precompiled_dir`, written by `guest precompile` when the image is
    // built, writable by no one else), from the cache directory (see `Config::cache_dir`: it
    // must be writable only by the operator), or from the child process running the operator's
    // own binary (`Config::compiler`); and wasmtime checks that
    // the artifact's version and engine settings match before using it.
    Ok(unsafe { Component::deserialize(engine, bytes) }?)
}

fn store_artifact(component: &Component, path: &Path) -> Result<(), BoxError> {
    let bytes = component.serialize()?;
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    // NB: write then rename, so a concurrent reader never maps a half-written artifact.
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)?;
    Ok(())
}
