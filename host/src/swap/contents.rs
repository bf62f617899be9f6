//! What a guest ConfigMap holds: the stable and the canary guest, their signatures, the
//! canary's selector and the pins, read from the ConfigMap and checked for shape. The record of
//! the guests in force ([`super::record`]) has the same shape.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::pin::{self, Pins};
use super::{CanaryKey, Role, SetKey};
use crate::consts::{
    ANNOTATION_CANARY_PIN, ANNOTATION_CANARY_SELECTOR, ANNOTATION_GUEST_PIN, CANARY_KEY,
    CANARY_SIGNATURE_KEY, GUEST_KEY, GUEST_SIGNATURE_KEY,
};
use crate::guest;

/// One guest taken from a ConfigMap, with the signature found beside it.
#[derive(Clone, Debug)]
pub struct Guest {
    /// The component.
    pub wasm: Arc<[u8]>,
    /// The content of its `.sig` key.
    pub signature: Option<Vec<u8>>,
}

/// The canary guest and the AppServices it renders.
#[derive(Clone, Debug)]
pub struct Canary {
    /// The guest.
    pub guest: Guest,
    /// Its label selector, as written (parsed when the guest is loaded).
    pub selector: String,
}

/// The content of a guest ConfigMap. No stable guest means the base guest.
#[derive(Clone, Debug, Default)]
pub struct Contents {
    /// The stable guest, [`GUEST_KEY`].
    pub stable: Option<Guest>,
    /// The canary, [`CANARY_KEY`] and [`ANNOTATION_CANARY_SELECTOR`].
    pub canary: Option<Canary>,
    /// The pins the ConfigMap's annotations set.
    pub pins: Pins,
}

impl Contents {
    /// Reads `cm`; fails with what is wrong with its shape ([`malformed`]).
    pub fn parse(cm: &ConfigMap) -> Result<Self, String> {
        if let Some(problem) = malformed(cm) {
            return Err(problem);
        }
        let binary = |key: &str| {
            cm.binary_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
        };
        let guest = |key: &str, signature: &str| {
            binary(key).map(|wasm| Guest {
                wasm: wasm.into(),
                signature: binary(signature),
            })
        };
        let annotation = |key: &str| cm.annotations().get(key).cloned();
        Ok(Self {
            stable: guest(GUEST_KEY, GUEST_SIGNATURE_KEY),
            canary: guest(CANARY_KEY, CANARY_SIGNATURE_KEY).map(|guest| Canary {
                guest,
                selector: annotation(ANNOTATION_CANARY_SELECTOR).unwrap_or_default(),
            }),
            pins: Pins {
                stable: annotation(ANNOTATION_GUEST_PIN).map(|p| pin::normalize(&p)),
                canary: annotation(ANNOTATION_CANARY_PIN).map(|p| pin::normalize(&p)),
            },
        })
    }

    /// The guests it holds, by role.
    pub fn guests(&self) -> impl Iterator<Item = (Role, &Guest)> {
        let stable = self.stable.as_ref().map(|g| (Role::Stable, g));
        let canary = self.canary.as_ref().map(|c| (Role::Canary, &c.guest));
        stable.into_iter().chain(canary)
    }

    /// The key of the set it makes, with `base` as the stable guest when it holds none.
    pub fn set_key(&self, base: &[u8]) -> SetKey {
        let stable = self.stable.as_ref().map_or(base, |g| &g.wasm);
        SetKey {
            stable: guest::digest(stable),
            canary: self.canary.as_ref().map(|c| CanaryKey {
                digest: guest::digest(&c.guest.wasm),
                selector: c.selector.clone(),
            }),
        }
    }

    /// The signatures of the stable and the canary guest.
    pub fn signatures(&self) -> [Option<&[u8]>; 2] {
        [
            self.stable.as_ref().and_then(|g| g.signature.as_deref()),
            self.canary
                .as_ref()
                .and_then(|c| c.guest.signature.as_deref()),
        ]
    }

    /// The ConfigMap named `name` holding the guests, their signatures and the canary's
    /// selector (not the pins): the record of a set put in force.
    pub fn to_configmap(&self, name: &str) -> ConfigMap {
        let mut data = BTreeMap::new();
        let mut annotations = BTreeMap::new();
        let mut put = |key: &str, signature_key: &str, guest: &Guest| {
            data.insert(key.to_owned(), ByteString(guest.wasm.to_vec()));
            if let Some(signature) = &guest.signature {
                data.insert(signature_key.to_owned(), ByteString(signature.clone()));
            }
        };
        if let Some(stable) = &self.stable {
            put(GUEST_KEY, GUEST_SIGNATURE_KEY, stable);
        }
        if let Some(canary) = &self.canary {
            put(CANARY_KEY, CANARY_SIGNATURE_KEY, &canary.guest);
            annotations.insert(
                ANNOTATION_CANARY_SELECTOR.to_owned(),
                canary.selector.clone(),
            );
        }
        let mut cm = ConfigMap {
            binary_data: Some(data),
            ..ConfigMap::default()
        };
        cm.metadata.name = Some(name.to_owned());
        cm.metadata.annotations = Some(annotations);
        cm
    }
}

/// What is wrong with the shape of guest ConfigMap `cm`, if anything: the guests belong under
/// `binaryData` keys [`GUEST_KEY`] and [`CANARY_KEY`], their signatures under
/// [`GUEST_SIGNATURE_KEY`] and [`CANARY_SIGNATURE_KEY`], and nothing else is expected there or
/// under `data` (a guest under `data`, or a misspelt key, would otherwise be silently ignored
/// and the base guest run instead; a signature without its guest is a leftover). A ConfigMap
/// with no keys at all is well-formed: it holds no guest.
fn malformed(cm: &ConfigMap) -> Option<String> {
    let guests = [GUEST_KEY, CANARY_KEY];
    let signatures = [GUEST_SIGNATURE_KEY, CANARY_SIGNATURE_KEY];
    if let Some(key) = cm.data.iter().flat_map(|d| d.keys()).next() {
        let hint = if guests.contains(&key.as_str()) {
            "; a guest is binary and belongs under binaryData (`app-operator guest push` puts it there)"
        } else if signatures.contains(&key.as_str()) {
            "; a signature belongs under binaryData too (`app-operator guest push --signature` puts it there)"
        } else {
            ""
        };
        return Some(format!("unexpected key `{key}` under data{hint}"));
    }
    let binary = cm.binary_data.as_ref();
    let has = |key: &str| binary.is_some_and(|d| d.contains_key(key));
    if let Some(key) = binary
        .iter()
        .flat_map(|d| d.keys())
        .find(|key| !guests.contains(&key.as_str()) && !signatures.contains(&key.as_str()))
    {
        return Some(format!(
            "unexpected key `{key}` under binaryData; expected `{GUEST_KEY}`, `{CANARY_KEY}` and \
             their signatures `{GUEST_SIGNATURE_KEY}`, `{CANARY_SIGNATURE_KEY}`"
        ));
    }
    guests
        .into_iter()
        .zip(signatures)
        .find(|(guest, signature)| has(signature) && !has(guest))
        .map(|(guest, signature)| format!("signature `{signature}` without its guest `{guest}`"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::{Contents, malformed};
    use crate::guest;

    fn cm(data: &[&str], binary: &[&str]) -> ConfigMap {
        let data: BTreeMap<_, _> = data.iter().map(|k| (k.to_string(), "x".into())).collect();
        let binary: BTreeMap<_, _> = binary
            .iter()
            .map(|k| (k.to_string(), ByteString(k.as_bytes().to_vec())))
            .collect();
        ConfigMap {
            data: (!data.is_empty()).then_some(data),
            binary_data: (!binary.is_empty()).then_some(binary),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn guests_belong_under_binary_data_with_known_keys() {
        assert_eq!(malformed(&cm(&[], &[])), None);
        assert_eq!(malformed(&cm(&[], &["guest.wasm", "canary.wasm"])), None);
        let text = malformed(&cm(&["guest.wasm"], &[])).expect("a guest under data");
        assert!(text.contains("belongs under binaryData"), "{text}");
        let typo = malformed(&cm(&[], &["guest.wsm"])).expect("a misspelt key");
        assert!(typo.contains("`guest.wsm` under binaryData"), "{typo}");
    }

    #[test]
    fn signatures_sit_beside_their_guests() {
        let all = [
            "guest.wasm",
            "guest.wasm.sig",
            "canary.wasm",
            "canary.wasm.sig",
        ];
        assert_eq!(malformed(&cm(&[], &all)), None);
        let text = malformed(&cm(&["guest.wasm.sig"], &["guest.wasm"])).expect("text signature");
        assert!(
            text.contains("a signature belongs under binaryData"),
            "{text}"
        );
        let stale = malformed(&cm(&[], &["guest.wasm", "canary.wasm.sig"])).expect("leftover");
        assert_eq!(
            stale,
            "signature `canary.wasm.sig` without its guest `canary.wasm`"
        );
    }

    #[test]
    fn a_record_reads_back_as_the_contents_it_was_written_from() {
        let mut source = cm(&[], &["guest.wasm", "canary.wasm", "canary.wasm.sig"]);
        source.metadata.annotations = Some(BTreeMap::from([
            (
                "apps.kudevops.io/canary-selector".to_owned(),
                "track=canary".to_owned(),
            ),
            ("apps.kudevops.io/guest-sha256".to_owned(), "ABC".to_owned()),
        ]));
        let contents = Contents::parse(&source).expect("well-formed");
        assert_eq!(contents.pins.stable.as_deref(), Some("sha256:abc"));
        let back = Contents::parse(&contents.to_configmap("r")).expect("well-formed");
        let base = b"base";
        assert_eq!(back.set_key(base), contents.set_key(base));
        assert_eq!(back.signatures(), contents.signatures());
        assert_eq!(back.pins, Default::default(), "the record holds no pins");
        let key = back.set_key(base);
        assert_eq!(key.stable, guest::digest(b"guest.wasm"));
        let canary = key.canary.expect("a canary");
        assert_eq!(canary.selector, "track=canary");

        let empty = Contents::parse(&Contents::default().to_configmap("r")).expect("empty");
        assert!(empty.stable.is_none() && empty.canary.is_none());
        assert_eq!(empty.set_key(base).stable, guest::digest(base));
    }
}
