//! Why a candidate set of guests is not put in force, and the checks made before it is even
//! loaded: signatures ([`super::trust`]) and pins ([`super::pin`]), both on the component bytes
//! (a guest pulled by reference is checked once pulled and verified, as an inline one).

use super::contents::Contents;
use super::pin::{self, Origin, Pins};
use super::regression::Regressions;
use super::{Role, selector, trust};
use crate::guest;

/// Why a candidate was not put in force. [`Rejection::kind`] is a fixed metric label.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// The ConfigMap is not shaped as a guest ConfigMap.
    #[error("malformed guest ConfigMap: {0}")]
    Malformed(String),
    /// A guest given by reference could not be pulled and verified.
    #[error("failed to pull the {role} guest")]
    Fetch {
        /// Which guest.
        role: Role,
        /// What the registry client said.
        #[source]
        source: crate::oci::Error,
    },
    /// The canary selector does not parse.
    #[error(transparent)]
    Selector(#[from] selector::Error),
    /// The bytes are not a guest of a supported contract version.
    #[error("failed to load the {role} guest")]
    Load {
        /// Which guest.
        role: Role,
        /// What the runtime said.
        #[source]
        source: guest::Error,
    },
    /// A guest does not match its pinned digest.
    #[error(transparent)]
    Pin(#[from] pin::Mismatch),
    /// Trusted keys are configured and the guest carries no signature (`source` is `None`) or
    /// one that does not verify.
    #[error("the {role} guest {digest} {}", signature_problem(.source.as_ref()))]
    Signature {
        /// Which guest.
        role: Role,
        /// Digest of the bytes.
        digest: String,
        /// Why the signature does not verify.
        #[source]
        source: Option<trust::Error>,
    },
    /// The live AppServices could not be listed for the dry run.
    #[error("failed to list AppServices for the dry run")]
    List(#[source] kube::Error),
    /// The namespaces' Pod Security labels could not be read for the dry run.
    #[error("failed to read the namespaces of the AppServices for the dry run")]
    Namespaces(#[source] kube::Error),
    /// The candidate would make things worse than the guests in force on live AppServices.
    #[error(transparent)]
    DryRun(#[from] Regressions),
}

/// The end of [`Rejection::Signature`]'s message.
fn signature_problem(source: Option<&trust::Error>) -> &'static str {
    match source {
        None => "is not signed, and --guest-trusted-key requires a signature",
        Some(_) => "fails the signature check",
    }
}

impl Rejection {
    /// A fixed, low-cardinality name of the reason.
    pub fn kind(&self) -> &'static str {
        match self {
            Rejection::Malformed(_) => "malformed",
            Rejection::Fetch { source, .. } => source.kind(),
            Rejection::Selector(_) => "selector",
            Rejection::Load { .. } => "load",
            Rejection::Pin(_) => "pin",
            Rejection::Signature { .. } => "signature",
            Rejection::List(_) => "list",
            Rejection::Namespaces(_) => "namespaces",
            Rejection::DryRun(_) => "dry_run",
        }
    }

    /// Whether the verdict says nothing about the candidate, so that it is tried again rather
    /// than rejected: the API server did not answer, or a blocking task failed.
    pub fn is_transient(&self) -> bool {
        match self {
            Rejection::List(_) | Rejection::Namespaces(_) => true,
            Rejection::Fetch { source, .. } => source.is_transient(),
            Rejection::Load { source, .. } => source.is_interrupted(),
            Rejection::DryRun(regressions) => regressions.is_transient(),
            Rejection::Malformed(_)
            | Rejection::Selector(_)
            | Rejection::Pin(_)
            | Rejection::Signature { .. } => false,
        }
    }
}

/// Checks every guest of `contents` before it is loaded: with trusted keys, that it is signed
/// by one of them; and that it matches each of `pins` (by where they were set) that pins it.
pub fn check(
    contents: &Contents,
    keys: Option<&trust::TrustedKeys>,
    pins: &[(&Pins, Origin)],
) -> Result<(), Rejection> {
    for (role, guest) in contents.guests() {
        let digest = || guest::digest(&guest.wasm);
        if let Some(keys) = keys {
            let verified = match &guest.signature {
                Some(signature) => keys.verify(&guest.wasm, signature).map_err(Some),
                None => Err(None),
            };
            if let Err(source) = verified {
                return Err(Rejection::Signature {
                    role,
                    digest: digest(),
                    source,
                });
            }
        }
        for (pins, origin) in pins {
            pins.check(role, &digest(), *origin)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Rejection, check};
    use crate::swap::contents::{Canary, Contents, Guest};
    use crate::swap::pin::{Origin, Pins};
    use crate::swap::trust::{self, TrustedKeys};

    #[test]
    fn failures_to_evaluate_are_transient_verdicts_are_not() {
        let unreachable = || kube::Error::Service("connection refused".into());
        assert!(Rejection::List(unreachable()).is_transient());
        assert!(Rejection::Namespaces(unreachable()).is_transient());
        assert!(!Rejection::Malformed("x".into()).is_transient());
        let load = Rejection::Load {
            role: crate::swap::Role::Stable,
            source: crate::guest::Error::Config("x".into()),
        };
        assert!(!load.is_transient());
    }

    /// The fixture keys of `host/tests/fixtures/keys`.
    fn keys() -> TrustedKeys {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys");
        TrustedKeys::load(&[dir.join("trusted.pub.pem")]).expect("the fixture key loads")
    }

    fn signature(wasm: &[u8], key: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys");
        let pem = std::fs::read_to_string(dir.join(key)).expect("the fixture key reads");
        trust::sign(&pem, wasm).expect("it signs").to_file()
    }

    fn contents(
        stable: Option<(&[u8], Option<Vec<u8>>)>,
        canary: Option<(&[u8], Option<Vec<u8>>)>,
    ) -> Contents {
        let guest = |(wasm, signature): (&[u8], Option<Vec<u8>>)| Guest {
            wasm: Arc::from(wasm),
            reference: None,
            signature,
        };
        Contents {
            stable: stable.map(guest),
            canary: canary.map(|c| Canary {
                guest: guest(c),
                selector: "track=canary".into(),
            }),
            pins: Pins::default(),
        }
    }

    #[test]
    fn with_trusted_keys_every_configured_guest_is_signed() {
        let (stable, canary) = (&b"stable"[..], &b"canary"[..]);
        let good = signature(stable, "trusted.key.pem");
        let good_canary = signature(canary, "trusted.key.pem");
        let keys = keys();
        // No keys: nothing is checked.
        assert!(check(&contents(Some((stable, None)), None), None, &[]).is_ok());
        // The base guest (no guest in the ConfigMap) needs no signature.
        assert!(check(&Contents::default(), Some(&keys), &[]).is_ok());
        let both = contents(
            Some((stable, Some(good.clone()))),
            Some((canary, Some(good_canary))),
        );
        assert!(check(&both, Some(&keys), &[]).is_ok());

        let unsigned = contents(Some((stable, Some(good.clone()))), Some((canary, None)));
        let unsigned = check(&unsigned, Some(&keys), &[]).expect_err("an unsigned canary");
        assert_eq!(unsigned.kind(), "signature");
        assert_eq!(
            unsigned.to_string(),
            format!(
                "the canary guest {} is not signed, and --guest-trusted-key requires a signature",
                crate::guest::digest(canary)
            )
        );
        let untrusted = signature(stable, "untrusted.key.pem");
        let wrong = check(
            &contents(Some((stable, Some(untrusted))), None),
            Some(&keys),
            &[],
        )
        .expect_err("an untrusted key");
        assert_eq!(
            crate::error_chain(&wrong),
            format!(
                "the stable guest {} fails the signature check: the signature does not verify \
                 with any trusted key",
                crate::guest::digest(stable)
            )
        );
        // The signature of another guest.
        let swapped = check(
            &contents(Some((canary, Some(good))), None),
            Some(&keys),
            &[],
        );
        assert!(matches!(
            swapped,
            Err(Rejection::Signature {
                role: crate::swap::Role::Stable,
                ..
            })
        ));
    }

    #[test]
    fn every_pin_that_applies_must_match() {
        let (stable, canary) = (&b"stable"[..], &b"canary"[..]);
        let both = contents(Some((stable, None)), Some((canary, None)));
        let digest = crate::guest::digest;
        let annotations = Pins {
            stable: Some(digest(stable)),
            canary: None,
        };
        let flags = Pins {
            stable: None,
            canary: Some(digest(canary)),
        };
        let pins = [(&annotations, Origin::ConfigMap), (&flags, Origin::Flags)];
        assert!(check(&both, None, &pins).is_ok());
        let other = contents(Some((stable, None)), Some((b"other", None)));
        let wrong = check(&other, None, &pins).expect_err("another canary");
        assert_eq!(wrong.kind(), "pin");
        assert!(wrong.to_string().ends_with("(--canary-pin)"), "{wrong}");
        // A pin without its guest binds nothing.
        assert!(check(&contents(Some((stable, None)), None), None, &pins).is_ok());
    }
}
