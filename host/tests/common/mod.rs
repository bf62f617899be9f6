//! What the host's integration tests share: the example guests `make guests` builds.

use std::path::PathBuf;

/// Where `make guests` (hack/guests/build.sh) puts the example guests:
/// `$APP_OPERATOR_GUESTS_DIR`, else `target/guests`; `precompiled/` beside them is the
/// precompiled cache the tests share.
pub(crate) fn guests_dir() -> PathBuf {
    std::env::var_os("APP_OPERATOR_GUESTS_DIR")
        .map_or_else(|| PathBuf::from("../target/guests"), PathBuf::from)
}

/// `target/guests/<name>.wasm`; fails, saying how to build it, when it is missing.
pub(crate) fn example_guest(name: &str) -> Vec<u8> {
    let path = guests_dir().join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the example guests with `make guests` (hack/guests/build.sh)",
            path.display()
        )
    })
}
