//! Signed guests: the Ed25519 public keys a guest from the guest ConfigMap must be signed with,
//! and the signature itself, over the guest's sha256.
//!
//! The signed message is [`CONTEXT`] followed by the guest's digest as the host prints it
//! (`sha256:<hex>`, [`guest::digest`]): the context keeps a guest signature from being valid
//! for anything else the same key signs. A signature file holds the base64 of the 64-byte
//! signature on one line; the same bytes go under the `.sig` keys of the guest ConfigMap.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};

use crate::guest;

/// What precedes the digest in the signed message; a new format gets a new version.
pub const CONTEXT: &[u8] = b"app-operator guest signature v1\n";

/// Why a key could not be loaded or a signature not made or verified.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A key file or directory could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A trusted key file is not an Ed25519 public key.
    #[error(
        "{path} is not an Ed25519 public key in PEM (SubjectPublicKeyInfo, as `openssl pkey -pubout` writes)"
    )]
    PublicKey {
        /// The file.
        path: PathBuf,
        /// What the decoder said.
        #[source]
        source: ed25519_dalek::pkcs8::spki::Error,
    },
    /// A directory of trusted keys holds no `*.pem` file.
    #[error("no *.pem file in directory {0}")]
    NoKeys(PathBuf),
    /// The signing key is not an Ed25519 private key.
    #[error(
        "not an Ed25519 private key in PEM (PKCS#8, as `openssl genpkey -algorithm ed25519` writes)"
    )]
    PrivateKey(#[source] ed25519_dalek::pkcs8::Error),
    /// The signature is not base64.
    #[error("the signature is not base64")]
    Encoding(#[source] base64::DecodeError),
    /// The signature does not have the length of an Ed25519 signature.
    #[error("the signature has {0} bytes, not 64")]
    Length(usize),
    /// No trusted key verifies the signature.
    #[error("the signature does not verify with any trusted key")]
    Mismatch,
}

/// An Ed25519 signature of a guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature(ed25519_dalek::Signature);

impl Signature {
    /// Parses the content of a signature file: base64 of the 64 bytes, surrounding whitespace
    /// (the final newline) ignored.
    pub fn parse(text: &[u8]) -> Result<Self, Error> {
        let bytes = STANDARD
            .decode(text.trim_ascii())
            .map_err(Error::Encoding)?;
        let bytes: [u8; 64] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| Error::Length(b.len()))?;
        Ok(Self(ed25519_dalek::Signature::from_bytes(&bytes)))
    }

    /// The content of a signature file: base64 and a newline.
    pub fn to_file(&self) -> Vec<u8> {
        format!("{self}\n").into_bytes()
    }
}

impl fmt::Display for Signature {
    /// The base64 of the 64 bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&STANDARD.encode(self.0.to_bytes()))
    }
}

/// What is signed for `wasm`: [`CONTEXT`], then `sha256:<hex>`.
fn message(wasm: &[u8]) -> Vec<u8> {
    [CONTEXT, guest::digest(wasm).as_bytes()].concat()
}

/// Signs `wasm` with the Ed25519 private key `private_key_pem` (PKCS#8 PEM, as `openssl genpkey
/// -algorithm ed25519` writes it).
pub fn sign(private_key_pem: &str, wasm: &[u8]) -> Result<Signature, Error> {
    let key = SigningKey::from_pkcs8_pem(private_key_pem).map_err(Error::PrivateKey)?;
    Ok(Signature(key.sign(&message(wasm))))
}

/// The public keys guests must be signed with, each with the file it came from.
#[derive(Clone, Debug)]
pub struct TrustedKeys {
    keys: Vec<(PathBuf, VerifyingKey)>,
}

impl TrustedKeys {
    /// Reads Ed25519 public keys in PEM (SubjectPublicKeyInfo, as `openssl pkey -pubout` writes
    /// them). A path is a key file, or a directory whose `*.pem` files (hidden ones aside, such
    /// as the `..data` links of a mounted Secret) are all keys; a directory without one is an
    /// error, so that a missing Secret does not go unnoticed. Any file that is not such a key
    /// is an error naming it.
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<Self, Error> {
        let mut keys = Vec::new();
        for path in paths {
            let path = path.as_ref();
            let read = |source| Error::Read {
                path: path.to_owned(),
                source,
            };
            if path.metadata().map_err(read)?.is_dir() {
                let mut files = Vec::new();
                for entry in std::fs::read_dir(path).map_err(read)? {
                    let file = entry.map_err(read)?.path();
                    let name = file.file_name().unwrap_or_default().to_string_lossy();
                    if !name.starts_with('.') && name.ends_with(".pem") && file.is_file() {
                        files.push(file);
                    }
                }
                if files.is_empty() {
                    return Err(Error::NoKeys(path.to_owned()));
                }
                files.sort();
                for file in files {
                    keys.push(load_key(file)?);
                }
            } else {
                keys.push(load_key(path.to_owned())?);
            }
        }
        Ok(Self { keys })
    }

    /// The files the keys came from, in the order they are tried.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.keys.iter().map(|(path, _)| path.as_path())
    }

    /// How many keys are trusted.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is trusted (then no guest verifies).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks that `signature` (the content of a signature file) is a signature of `wasm` by
    /// one of the trusted keys.
    pub fn verify(&self, wasm: &[u8], signature: &[u8]) -> Result<(), Error> {
        let Signature(signature) = Signature::parse(signature)?;
        let message = message(wasm);
        // NB: verify_strict refuses the weak keys and malleable signatures plain verify allows.
        self.keys
            .iter()
            .any(|(_, key)| key.verify_strict(&message, &signature).is_ok())
            .then_some(())
            .ok_or(Error::Mismatch)
    }
}

fn load_key(path: PathBuf) -> Result<(PathBuf, VerifyingKey), Error> {
    let pem = match std::fs::read_to_string(&path) {
        Ok(pem) => pem,
        Err(source) => return Err(Error::Read { path, source }),
    };
    match VerifyingKey::from_public_key_pem(&pem) {
        Ok(key) => Ok((path, key)),
        Err(source) => Err(Error::PublicKey { path, source }),
    }
}

#[cfg(test)]
mod tests;
