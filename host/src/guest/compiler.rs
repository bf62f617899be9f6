//! Compiling a guest in a child process: the operator runs its own binary as
//! `app-operator guest compile`, which reads the component on stdin and writes the precompiled
//! artifact on stdout, for an engine with the same settings.
//!
//! Why: Cranelift's code and the compile's heap (about 10 MiB of the idle operator's 30 MiB
//! with the default guest, far more for an 18 MB Python component) then live and die with the
//! child, and a compile that runs away is killed at [`COMPILE_DEADLINE`] without touching the
//! operator. The parent loads the artifact as it loads one from the disk cache.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{Config, engine};

/// How long a child compile may take before it is killed.
pub const COMPILE_DEADLINE: Duration = Duration::from_secs(300);

/// Exit code of a child that compiled nothing because the component is invalid; its stderr
/// says why.
const EXIT_INVALID: i32 = 3;

/// At most this much of a child's stderr is kept for the error message.
const STDERR_BYTES: u64 = 4 << 10;

/// Why a child compile gave no artifact.
#[derive(Debug, thiserror::Error)]
pub(super) enum ChildError {
    /// The component does not compile: the child's own message. A compile in this process
    /// would fail the same way.
    #[error("{0}")]
    Invalid(String),
    /// The child took longer than [`COMPILE_DEADLINE`], or was killed (by the kernel's OOM
    /// killer, for instance). Compiling in this process instead could take the operator down.
    #[error("the compile {0}")]
    Aborted(String),
    /// The child could not be run or talked to; a compile in this process is the fallback.
    #[error("could not compile in a child process: {0}")]
    Unavailable(String),
}

/// The arguments that give the child an engine with `config`'s settings (the ones that change
/// the compiled code or its compatibility: memory size, instance count, fuel).
fn child_args(config: &Config) -> Vec<String> {
    let mut args = vec![
        "guest".to_owned(),
        "compile".to_owned(),
        format!("--memory-limit-bytes={}", config.memory_limit),
        format!("--memory-budget-bytes={}", config.memory_budget),
    ];
    if config.fuel.is_some() {
        args.push("--fuel".to_owned());
    }
    args
}

/// Compiles `wasm` by running `program` with [`child_args`]; returns the serialized artifact.
pub(super) fn in_child(
    program: &Path,
    config: &Config,
    wasm: &[u8],
) -> Result<Vec<u8>, ChildError> {
    let unavailable = |e: std::io::Error| ChildError::Unavailable(e.to_string());
    let mut child = Command::new(program)
        .args(child_args(config))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(unavailable)?;
    let (mut stdin, mut stdout, stderr) = (
        child.stdin.take().expect("piped"),
        child.stdout.take().expect("piped"),
        child.stderr.take().expect("piped"),
    );
    // NB: the three pipes are served at once, so that neither side blocks on a full pipe.
    let input = wasm.to_vec();
    let writer = thread::spawn(move || stdin.write_all(&input));
    let reader = thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).map(|_| out)
    });
    let errors = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.take(STDERR_BYTES).read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(unavailable)? {
            break status;
        }
        if started.elapsed() > COMPILE_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ChildError::Aborted(format!(
                "took longer than {} s and was stopped",
                COMPILE_DEADLINE.as_secs()
            )));
        }
        thread::sleep(Duration::from_millis(5));
    };
    let message = errors.join().unwrap_or_default().trim().to_owned();
    let written = writer
        .join()
        .map_err(|_| ChildError::Unavailable("writer panicked".into()))?;
    let out = reader
        .join()
        .map_err(|_| ChildError::Unavailable("reader panicked".into()))?;
    match status.code() {
        Some(0) => {
            written.map_err(unavailable)?;
            out.map_err(unavailable)
        }
        Some(EXIT_INVALID) => Err(ChildError::Invalid(message)),
        Some(code) => Err(ChildError::Unavailable(format!(
            "exit code {code}: {message}"
        ))),
        None => Err(ChildError::Aborted(format!(
            "was killed ({status}){}",
            if message.is_empty() {
                String::new()
            } else {
                format!(": {message}")
            }
        ))),
    }
}

/// The child's side (`app-operator guest compile`): reads a component from stdin, compiles it
/// for an engine built from `config` as the parent's is, and writes the artifact to stdout.
/// Exits with [`EXIT_INVALID`] when the component does not compile.
pub fn serve(config: &Config) -> std::process::ExitCode {
    let mut wasm = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut wasm) {
        eprintln!("reading the component from stdin: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let engine = match engine::build(config, config.instances().max(1)) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let artifact = match engine.precompile_component(&wasm) {
        Ok(artifact) => artifact,
        Err(e) => {
            eprintln!("{e:#}");
            return std::process::ExitCode::from(EXIT_INVALID as u8);
        }
    };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&artifact).and_then(|()| stdout.flush()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("writing the artifact to stdout: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
