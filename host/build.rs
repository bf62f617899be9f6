//! Builds the guests for `wasm32-wasip2` with a nested cargo, so `cargo build` alone produces a
//! host with the default guest embedded.
//!
//! Sets `APP_OPERATOR_DEFAULT_GUEST` (embedded by `guest::default_guest`) and
//! `APP_OPERATOR_HOSTILE_GUEST` (read by the sandbox tests) and `APP_OPERATOR_TIERED_GUEST` (the
//! example guest of `examples/guests/tiered`, read by the hot swap tests) and
//! `APP_OPERATOR_CONDITIONS_GUEST` (the 0.2.0 example guest of `examples/guests/conditions`) to
//! the built `.wasm` paths.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `(package, artifact stem, env var)` of each guest built here.
const GUESTS: [(&str, &str, &str); 4] = [
    (
        "app-operator-guest",
        "app_operator_guest",
        "APP_OPERATOR_DEFAULT_GUEST",
    ),
    (
        "app-operator-hostile-guest",
        "app_operator_hostile_guest",
        "APP_OPERATOR_HOSTILE_GUEST",
    ),
    (
        "app-operator-example-tiered-guest",
        "app_operator_example_tiered_guest",
        "APP_OPERATOR_TIERED_GUEST",
    ),
    (
        "app-operator-example-conditions-guest",
        "app_operator_example_conditions_guest",
        "APP_OPERATOR_CONDITIONS_GUEST",
    ),
];

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "guest";

fn main() {
    link_args();
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .parent()
        .expect("host/ lives in the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let target_dir = out_dir.join("guests");

    for dir in [
        "guest",
        "wit",
        "tests/guests",
        "examples/guests",
        "Cargo.lock",
        ".cargo/config.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--target",
            TARGET,
            "--profile",
            PROFILE,
            "--target-dir",
        ])
        .arg(&target_dir);
    for (package, _, _) in GUESTS {
        cmd.args(["-p", package]);
    }
    // NB: the outer cargo's flags are for the host target; the guest's come from
    // .cargo/config.toml ([target.wasm32-wasip2]). Clippy's wrapper would also lint the guests
    // twice. The jobserver (CARGO_MAKEFLAGS) is kept so the nested build shares the job slots.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("failed to run cargo for the guests");
    assert!(
        status.success(),
        "building the guests for {TARGET} failed; is the target installed? \
         (`rustup target add {TARGET}`)"
    );

    for (_, stem, var) in GUESTS {
        let wasm = target_dir
            .join(TARGET)
            .join(PROFILE)
            .join(format!("{stem}.wasm"));
        assert!(exists(&wasm), "guest artifact missing: {}", wasm.display());
        println!("cargo:rustc-env={var}={}", wasm.display());
    }
}

/// Linker flags for the operator binary on Linux with glibc (rust-lld, its default linker, knows
/// both): `pack-relative-relocs` stores the position-independent binary's relocations as DT_RELR, a
/// bitmap instead of 24 bytes each (2 MB less for the loader to read at start, measured 2.2 to
/// 3.5 MiB less idle RSS; glibc 2.36 or later runs it); `keep-text-section-prefix` keeps the
/// functions that a profile-guided build (hack/pgo.sh) marks hot or unlikely together, so the
/// code the operator runs lies on fewer pages. Only for glibc: the static musl binary's start
/// code has not been tried with DT_RELR.
fn link_args() {
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let libc = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && libc == "gnu" {
        for arg in [
            "-Wl,-z,pack-relative-relocs",
            "-Wl,-z,keep-text-section-prefix",
        ] {
            println!("cargo:rustc-link-arg-bin=app-operator={arg}");
        }
    }
}

fn exists(path: &Path) -> bool {
    path.try_exists().unwrap_or(false)
}
