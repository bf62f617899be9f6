//! `app-operator guest sign`: signs a guest with an Ed25519 private key, for an operator that
//! runs with `--guest-trusted-key`.

use std::path::{Path, PathBuf};

use crate::swap::trust::{self, Signature};
use crate::{Error, Result};

/// Arguments of `app-operator guest sign`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The guest component (`.wasm`).
    pub file: PathBuf,
    /// Ed25519 private key, PKCS#8 PEM (`openssl genpkey -algorithm ed25519 -out key.pem`).
    #[arg(long)]
    pub key: PathBuf,
    /// Where to write the signature (one line of base64). Default: FILE.sig.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

/// Runs the subcommand.
pub async fn exec(args: Args) -> Result<()> {
    let wasm = super::read(&args.file)?;
    let signature = sign_with(&args.key, &wasm)?;
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.file));
    std::fs::write(&output, signature.to_file()).map_err(|source| Error::Write {
        path: output.clone(),
        source,
    })?;
    println!(
        "signed {} with {}: {}",
        crate::guest::digest(&wasm),
        args.key.display(),
        output.display()
    );
    Ok(())
}

/// Signs `wasm` with the private key in file `key`.
pub fn sign_with(key: &Path, wasm: &[u8]) -> Result<Signature> {
    let pem = super::read(key)?;
    trust::sign(&String::from_utf8_lossy(&pem), wasm).map_err(|source| Error::SigningKey {
        path: key.to_owned(),
        source,
    })
}

/// `FILE.sig` beside `file`.
fn default_output(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".sig");
    name.into()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{default_output, sign_with};
    use crate::Error;

    #[test]
    fn the_signature_goes_beside_the_guest() {
        assert_eq!(
            default_output(Path::new("out/policy.wasm")),
            Path::new("out/policy.wasm.sig")
        );
    }

    #[test]
    fn a_bad_key_file_is_named() {
        let public =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys/trusted.pub.pem");
        let err = sign_with(&public, b"wasm").expect_err("a public key");
        assert!(matches!(&err, Error::SigningKey { path, .. } if *path == public));
        let text = crate::error_chain(&err);
        assert!(
            text.contains("trusted.pub.pem") && text.contains("not an Ed25519 private key"),
            "{text}"
        );
    }
}
