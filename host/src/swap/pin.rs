//! Pinned digests: the stable and the canary guest can each be pinned, on the guest ConfigMap
//! (annotations, written by `guest push --pin`) or outside it (`run --guest-pin` and
//! `--canary-pin`, in the operator's Deployment, which only admins write). A guest that does
//! not match every pin that applies to it is rejected, even when that digest already runs.

use super::Role;
use crate::consts::{ANNOTATION_CANARY_PIN, ANNOTATION_GUEST_PIN};

/// The pins of one place: `sha256:<hex>` digests, for the stable and the canary guest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pins {
    /// The digest the stable guest must have.
    pub stable: Option<String>,
    /// The digest the canary guest must have.
    pub canary: Option<String>,
}

/// Where a set of pins comes from, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The annotations of the guest ConfigMap.
    ConfigMap,
    /// The flags of `run`.
    Flags,
}

impl Origin {
    /// Where the pin of `role` is set, e.g. `--canary-pin`.
    pub fn describe(self, role: Role) -> String {
        match (self, role) {
            (Origin::ConfigMap, Role::Stable) => format!("annotation {ANNOTATION_GUEST_PIN}"),
            (Origin::ConfigMap, Role::Canary) => format!("annotation {ANNOTATION_CANARY_PIN}"),
            (Origin::Flags, Role::Stable) => "--guest-pin".to_owned(),
            (Origin::Flags, Role::Canary) => "--canary-pin".to_owned(),
        }
    }
}

/// A guest that does not match a pin.
#[derive(Debug, thiserror::Error)]
#[error("the {role} guest {digest} does not match the pin {pin} ({})", .origin.describe(*.role))]
pub struct Mismatch {
    /// Which guest.
    pub role: Role,
    /// Its digest.
    pub digest: String,
    /// The pin.
    pub pin: String,
    /// Where the pin was set.
    pub origin: Origin,
}

impl Pins {
    /// The pin of `role`'s guest, if any.
    pub fn get(&self, role: Role) -> Option<&str> {
        match role {
            Role::Stable => self.stable.as_deref(),
            Role::Canary => self.canary.as_deref(),
        }
    }

    /// Checks `digest`, the digest of `role`'s guest, against its pin set at `origin`.
    pub fn check(&self, role: Role, digest: &str, origin: Origin) -> Result<(), Mismatch> {
        match self.get(role) {
            Some(pin) if pin != digest => Err(Mismatch {
                role,
                digest: digest.to_owned(),
                pin: pin.to_owned(),
                origin,
            }),
            _ => Ok(()),
        }
    }
}

/// A pin as written (`sha256:<hex>` or `<hex>`), as a digest (`sha256:<hex>`, lower case).
pub fn normalize(pin: &str) -> String {
    let hex = pin.trim();
    let hex = hex.strip_prefix("sha256:").unwrap_or(hex);
    format!("sha256:{}", hex.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::{Origin, Pins, normalize};
    use crate::swap::Role;

    #[test]
    fn a_pin_binds_only_its_own_role() {
        let pins = Pins {
            stable: None,
            canary: Some("sha256:c".into()),
        };
        let origin = Origin::Flags;
        assert!(pins.check(Role::Stable, "sha256:x", origin).is_ok());
        assert!(pins.check(Role::Canary, "sha256:c", origin).is_ok());
        let wrong = pins
            .check(Role::Canary, "sha256:x", origin)
            .expect_err("another canary");
        assert_eq!(
            wrong.to_string(),
            "the canary guest sha256:x does not match the pin sha256:c (--canary-pin)"
        );
    }

    #[test]
    fn pins_are_digests_with_or_without_the_prefix() {
        assert_eq!(normalize("ABC"), "sha256:abc");
        assert_eq!(normalize(" sha256:abc\n"), "sha256:abc");
    }
}
