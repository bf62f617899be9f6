use std::path::PathBuf;

use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;

use super::{Error, Signature, TrustedKeys, sign};

/// Made with `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout`.
const TRUSTED_KEY: &str = include_str!("../../../tests/fixtures/keys/trusted.key.pem");
const UNTRUSTED_KEY: &str = include_str!("../../../tests/fixtures/keys/untrusted.key.pem");
/// A signature of [`FIXTURE_WASM`] by `trusted.key.pem`, made with `openssl pkeyutl -sign
/// -rawin` over the message the host signs (see the fixtures' README).
const OPENSSL_SIGNATURE: &[u8] = include_bytes!("../../../tests/fixtures/keys/openssl.sig");
const FIXTURE_WASM: &[u8] = b"not a guest, only bytes to sign";

const WASM: &[u8] = b"\0asm\x0d\x00\x01\x00";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/keys")
        .join(name)
}

fn trusted() -> TrustedKeys {
    TrustedKeys::load(&[fixture("trusted.pub.pem")]).expect("the fixture key loads")
}

/// A fresh directory under the system's temporary one, named after the test.
fn temp_dir(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("app-operator-trust-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the temporary directory is writable");
    dir
}

#[test]
fn a_signature_verifies_with_the_trusted_key() {
    let signature = sign(TRUSTED_KEY, WASM).expect("the fixture key signs");
    let file = signature.to_file();
    assert_eq!(file.len(), 89, "88 characters of base64 and a newline");
    assert!(file.ends_with(b"==\n"));
    trusted()
        .verify(WASM, &file)
        .expect("the signature verifies");
    assert_eq!(Signature::parse(&file).expect("it parses"), signature);
}

#[test]
fn a_signature_made_with_openssl_verifies() {
    trusted()
        .verify(FIXTURE_WASM, OPENSSL_SIGNATURE)
        .expect("openssl signs the same message");
    let ours = sign(TRUSTED_KEY, FIXTURE_WASM).expect("the fixture key signs");
    // NB: Ed25519 is deterministic: the same key and message give the same signature.
    assert_eq!(ours.to_file(), OPENSSL_SIGNATURE);
}

#[test]
fn another_key_is_not_trusted() {
    let signature = sign(UNTRUSTED_KEY, WASM).expect("the fixture key signs");
    let err = trusted()
        .verify(WASM, &signature.to_file())
        .expect_err("untrusted");
    assert!(matches!(err, Error::Mismatch), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the signature does not verify with any trusted key"
    );
}

#[test]
fn a_tampered_guest_does_not_verify() {
    let signature = sign(TRUSTED_KEY, WASM)
        .expect("the fixture key signs")
        .to_file();
    let mut tampered = WASM.to_vec();
    tampered.push(0);
    let err = trusted()
        .verify(&tampered, &signature)
        .expect_err("tampered");
    assert!(matches!(err, Error::Mismatch), "{err:?}");
}

#[test]
fn the_signature_covers_the_context() {
    // A bare signature of the digest, without the context, is not a guest signature.
    let key = SigningKey::from_bytes(&[7; 32]);
    let bare = ed25519_dalek::Signer::sign(&key, crate::guest::digest(WASM).as_bytes());
    let pem = key.to_pkcs8_pem(LineEnding::LF).expect("the key encodes");
    let dir = temp_dir("context");
    let public = dir.join("key.pem");
    let public_pem = ed25519_dalek::pkcs8::EncodePublicKey::to_public_key_pem(
        &key.verifying_key(),
        LineEnding::LF,
    )
    .expect("the key encodes");
    std::fs::write(&public, public_pem).expect("writable");
    let keys = TrustedKeys::load(&[&public]).expect("the key loads");
    let err = keys
        .verify(WASM, &Signature(bare).to_file())
        .expect_err("no context");
    assert!(matches!(err, Error::Mismatch), "{err:?}");
    let signed = sign(&pem, WASM).expect("the key signs");
    keys.verify(WASM, &signed.to_file())
        .expect("with the context");
}

#[test]
fn malformed_signatures_are_refused() {
    let keys = trusted();
    let err = keys.verify(WASM, b"not base64!").expect_err("not base64");
    assert!(matches!(err, Error::Encoding(_)), "{err:?}");
    let err = keys.verify(WASM, b"AAAA\n").expect_err("3 bytes");
    assert!(matches!(err, Error::Length(3)), "{err:?}");
    assert_eq!(err.to_string(), "the signature has 3 bytes, not 64");
    let err = keys.verify(WASM, b"").expect_err("empty");
    assert!(matches!(err, Error::Length(0)), "{err:?}");
    // The raw 64 bytes, not base64.
    let raw = sign(TRUSTED_KEY, WASM).expect("signs").0.to_bytes();
    assert!(keys.verify(WASM, &raw).is_err());
}

#[test]
fn a_directory_of_keys_trusts_each() {
    let dir = temp_dir("directory");
    for name in ["trusted.pub.pem", "untrusted.pub.pem"] {
        std::fs::copy(fixture(name), dir.join(name)).expect("copied");
    }
    // Not keys: a file of another extension and a hidden one, as a mounted Secret has.
    std::fs::write(dir.join("README"), "not a key").expect("writable");
    std::fs::write(dir.join(".hidden.pem"), "not a key").expect("writable");
    let keys = TrustedKeys::load(&[&dir]).expect("the directory loads");
    assert_eq!(keys.len(), 2);
    let names: Vec<_> = keys
        .files()
        .map(|p| p.file_name().map(|n| n.to_owned()))
        .collect();
    assert_eq!(
        names,
        [
            Some("trusted.pub.pem".into()),
            Some("untrusted.pub.pem".into())
        ]
    );
    for key in [TRUSTED_KEY, UNTRUSTED_KEY] {
        let signature = sign(key, WASM).expect("signs").to_file();
        keys.verify(WASM, &signature).expect("either key verifies");
    }
}

#[test]
fn files_and_directories_add_up() {
    let dir = temp_dir("mixed");
    std::fs::copy(fixture("untrusted.pub.pem"), dir.join("key.pem")).expect("copied");
    let keys = TrustedKeys::load(&[fixture("trusted.pub.pem"), dir]).expect("both load");
    assert_eq!(keys.len(), 2);
}

#[test]
fn a_key_that_is_not_ed25519_names_its_file() {
    let p256 = fixture("p256.pub.pem");
    let err = TrustedKeys::load(&[&p256]).expect_err("a P-256 key");
    assert!(
        matches!(&err, Error::PublicKey { path, .. } if *path == p256),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("p256.pub.pem is not an Ed25519 public key")
    );

    // A private key where a public one belongs.
    let private = fixture("trusted.key.pem");
    let err = TrustedKeys::load(&[&private]).expect_err("a private key");
    assert!(matches!(err, Error::PublicKey { .. }), "{err:?}");

    // In a directory, the bad file is named.
    let dir = temp_dir("bad-in-directory");
    std::fs::copy(fixture("trusted.pub.pem"), dir.join("a.pem")).expect("copied");
    std::fs::copy(&p256, dir.join("b.pem")).expect("copied");
    let err = TrustedKeys::load(&[&dir]).expect_err("b.pem");
    assert!(matches!(&err, Error::PublicKey { path, .. } if *path == dir.join("b.pem")));
}

#[test]
fn missing_files_and_empty_directories_are_errors() {
    let missing = fixture("missing.pem");
    let err = TrustedKeys::load(&[&missing]).expect_err("missing");
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    let dir = temp_dir("empty");
    let err = TrustedKeys::load(&[&dir]).expect_err("empty");
    assert!(matches!(err, Error::NoKeys(_)), "{err:?}");
}

#[test]
fn signing_needs_an_ed25519_private_key() {
    let public = std::fs::read_to_string(fixture("trusted.pub.pem")).expect("the fixture reads");
    let err = sign(&public, WASM).expect_err("a public key");
    assert!(matches!(err, Error::PrivateKey(_)), "{err:?}");
    assert!(sign("", WASM).is_err());
}
