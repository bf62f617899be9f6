//! Guests for tests: this crate's, and those outside it, such as the end-to-end tests (feature
//! `test-guests`).

/// The hostile test guest (`tests/guests/hostile`): `metadata.name` picks how it misbehaves
/// (`panic` traps, `policy-error` refuses, `loop` hits the deadline, ...).
pub fn hostile_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_HOSTILE_GUEST"))
}

/// The example guest `examples/guests/tiered`: the default mapping plus a tier label and
/// resource requests.
pub fn tiered_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_TIERED_GUEST"))
}

/// The example guest `examples/guests/conditions`, on contract 0.2.0: the objects plus an
/// `ImagePinned` condition and, for an image not pinned by digest, an `ImageNotPinned` Event.
pub fn conditions_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_CONDITIONS_GUEST"))
}

/// Where `make guests` (hack/guests/build.sh) builds the example guests:
/// `$APP_OPERATOR_GUESTS_DIR`, else the workspace's `target/guests/`. Its `precompiled/`
/// directory is the precompiled cache the tests that load them share.
pub fn example_guests_dir() -> std::path::PathBuf {
    std::env::var_os("APP_OPERATOR_GUESTS_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guests"),
        std::path::PathBuf::from,
    )
}

/// The example guest `name` (`python`, `javascript`) from [`example_guests_dir`]; an error
/// saying how to build it when it is missing.
pub fn example_guest(name: &str) -> Result<Vec<u8>, String> {
    let path = example_guests_dir().join(format!("{name}.wasm"));
    std::fs::read(&path).map_err(|e| {
        format!(
            "{}: {e}; build the example guests with `make guests` (hack/guests/build.sh)",
            path.display()
        )
    })
}
