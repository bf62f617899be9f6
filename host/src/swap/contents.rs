//! What a guest ConfigMap holds: the stable and the canary guest (inline, or by an OCI reference
//! pinned by digest), their signatures, the canary's selector and the pins, read from the
//! ConfigMap and checked for shape. The record of the guests in force ([`super::record`]) has
//! the same shape.
//!
//! Reading is in two steps: [`references`] names the guests to pull, and [`Contents::parse`]
//! takes them, pulled and verified, beside the inline ones.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::pin::{self, Pins};
use super::{CanaryKey, InForceKey, Role};
use crate::consts::{
    ANNOTATION_CANARY_PIN, ANNOTATION_CANARY_SELECTOR, ANNOTATION_GUEST_PIN, CANARY_KEY,
    CANARY_REF_KEY, CANARY_SIGNATURE_KEY, GUEST_KEY, GUEST_REF_KEY, GUEST_SIGNATURE_KEY,
};
use crate::guest;
use crate::oci::Pinned;

/// The components pulled for a ConfigMap's references, by reference.
pub type Pulled = BTreeMap<Pinned, Arc<[u8]>>;

/// One guest taken from a ConfigMap, with the signature found beside it.
#[derive(Clone, Debug)]
pub struct Guest {
    /// The component (pulled and verified when it came by reference).
    pub wasm: Arc<[u8]>,
    /// The content of its `.sig` key.
    pub signature: Option<Vec<u8>>,
    /// The reference it was pulled from; `None` for a guest inline in the ConfigMap.
    pub reference: Option<Pinned>,
}

/// The keys of one role: the inline guest, its reference, its signature.
const ROLES: [(Role, &str, &str, &str); 2] = [
    (Role::Stable, GUEST_KEY, GUEST_REF_KEY, GUEST_SIGNATURE_KEY),
    (
        Role::Canary,
        CANARY_KEY,
        CANARY_REF_KEY,
        CANARY_SIGNATURE_KEY,
    ),
];

/// The references `cm` names (stable first), to pull before [`Contents::parse`]; fails with
/// what is wrong with its shape, as [`Contents::parse`] would.
pub fn references(cm: &ConfigMap) -> Result<Vec<(Role, Pinned)>, String> {
    if let Some(problem) = malformed(cm) {
        return Err(problem);
    }
    let mut refs = Vec::new();
    for (role, _, ref_key, _) in ROLES {
        if let Some(text) = cm.data.as_ref().and_then(|d| d.get(ref_key)) {
            let pinned = Pinned::parse(text.trim()).map_err(|e| format!("`{ref_key}`: {e}"))?;
            refs.push((role, pinned));
        }
    }
    Ok(refs)
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
    /// Reads `cm`, whose referenced guests are in `pulled`; fails with what is wrong with its
    /// shape ([`malformed`]), or if `pulled` lacks one of its [`references`].
    pub fn parse(cm: &ConfigMap, pulled: &Pulled) -> Result<Self, String> {
        let refs = references(cm)?;
        let binary = |key: &str| {
            cm.binary_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
        };
        let mut guests = [None, None];
        for (slot, (role, key, _, signature)) in guests.iter_mut().zip(ROLES) {
            let by_ref = refs.iter().find(|(r, _)| *r == role).map(|(_, p)| p);
            let (wasm, reference) = match by_ref {
                Some(pinned) => {
                    let wasm = pulled
                        .get(pinned)
                        .ok_or_else(|| format!("the {role} guest {pinned} was not pulled"))?;
                    (Some(wasm.clone()), Some(pinned.clone()))
                }
                None => (binary(key).map(Arc::from), None),
            };
            *slot = wasm.map(|wasm| Guest {
                wasm,
                signature: binary(signature),
                reference,
            });
        }
        let [stable, canary] = guests;
        let annotation = |key: &str| cm.annotations().get(key).cloned();
        Ok(Self {
            stable,
            canary: canary.map(|guest| Canary {
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
    pub fn set_key(&self, base: &[u8]) -> InForceKey {
        let stable = self.stable.as_ref().map_or(base, |g| &g.wasm);
        InForceKey {
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

    /// The references of its guests pulled from a registry, with their components.
    pub fn pulled(&self) -> Pulled {
        self.guests()
            .filter_map(|(_, g)| Some((g.reference.clone()?, g.wasm.clone())))
            .collect()
    }

    /// The ConfigMap named `name` holding the guests (a pulled guest by its reference, not its
    /// bytes), their signatures and the canary's selector (not the pins): the record of a set
    /// put in force.
    pub fn to_configmap(&self, name: &str) -> ConfigMap {
        let mut binary = BTreeMap::new();
        let mut text = BTreeMap::new();
        let mut annotations = BTreeMap::new();
        for (role, key, ref_key, signature_key) in ROLES {
            let Some(guest) = self.guests().find(|(r, _)| *r == role).map(|(_, g)| g) else {
                continue;
            };
            if let Some(pinned) = &guest.reference {
                text.insert(ref_key.to_owned(), pinned.to_string());
            } else {
                binary.insert(key.to_owned(), ByteString(guest.wasm.to_vec()));
            }
            if let Some(signature) = &guest.signature {
                binary.insert(signature_key.to_owned(), ByteString(signature.clone()));
            }
        }
        if let Some(canary) = &self.canary {
            annotations.insert(
                ANNOTATION_CANARY_SELECTOR.to_owned(),
                canary.selector.clone(),
            );
        }
        let mut cm = ConfigMap {
            binary_data: Some(binary),
            data: Some(text),
            ..ConfigMap::default()
        };
        cm.metadata.name = Some(name.to_owned());
        cm.metadata.annotations = Some(annotations);
        cm
    }
}

/// What is wrong with the shape of guest ConfigMap `cm`, if anything: the guests belong under
/// `binaryData` keys [`GUEST_KEY`] and [`CANARY_KEY`], or by reference under `data` keys
/// [`GUEST_REF_KEY`] and [`CANARY_REF_KEY`] (one or the other per role), their signatures under
/// `binaryData` keys [`GUEST_SIGNATURE_KEY`] and [`CANARY_SIGNATURE_KEY`], and nothing else is
/// expected (a guest under `data`, or a misspelt key, would otherwise be silently ignored and
/// the base guest run instead; a signature without its guest is a leftover). A ConfigMap with
/// no keys at all is well-formed: it holds no guest.
fn malformed(cm: &ConfigMap) -> Option<String> {
    let guests = [GUEST_KEY, CANARY_KEY];
    let refs = [GUEST_REF_KEY, CANARY_REF_KEY];
    let signatures = [GUEST_SIGNATURE_KEY, CANARY_SIGNATURE_KEY];
    if let Some(key) = cm
        .data
        .iter()
        .flat_map(|d| d.keys())
        .find(|key| !refs.contains(&key.as_str()))
    {
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
    let has_ref = |key: &str| cm.data.as_ref().is_some_and(|d| d.contains_key(key));
    if let Some(key) = binary
        .iter()
        .flat_map(|d| d.keys())
        .find(|key| !guests.contains(&key.as_str()) && !signatures.contains(&key.as_str()))
    {
        let hint = if refs.contains(&key.as_str()) {
            "; a reference is text and belongs under data"
        } else {
            ""
        };
        return Some(format!(
            "unexpected key `{key}` under binaryData; expected `{GUEST_KEY}`, `{CANARY_KEY}` and \
             their signatures `{GUEST_SIGNATURE_KEY}`, `{CANARY_SIGNATURE_KEY}`{hint}"
        ));
    }
    if let Some((guest, reference)) = guests
        .into_iter()
        .zip(refs)
        .find(|(guest, reference)| has(guest) && has_ref(reference))
    {
        return Some(format!(
            "both `{guest}` and `{reference}`: a guest is inline or by reference, not both"
        ));
    }
    guests
        .into_iter()
        .zip(refs)
        .zip(signatures)
        .find(|((guest, reference), signature)| {
            has(signature) && !has(guest) && !has_ref(reference)
        })
        .map(|((guest, _), signature)| {
            format!("signature `{signature}` without its guest `{guest}`")
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::{Contents, Pulled, malformed, references};
    use crate::guest;
    use crate::oci::Pinned;

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
        let contents = Contents::parse(&source, &Pulled::new()).expect("well-formed");
        assert_eq!(contents.pins.stable.as_deref(), Some("sha256:abc"));
        let back =
            Contents::parse(&contents.to_configmap("r"), &Pulled::new()).expect("well-formed");
        let base = b"base";
        assert_eq!(back.set_key(base), contents.set_key(base));
        assert_eq!(back.signatures(), contents.signatures());
        assert_eq!(back.pins, Default::default(), "the record holds no pins");
        let key = back.set_key(base);
        assert_eq!(key.stable, guest::digest(b"guest.wasm"));
        let canary = key.canary.expect("a canary");
        assert_eq!(canary.selector, "track=canary");

        let empty =
            Contents::parse(&Contents::default().to_configmap("r"), &Pulled::new()).expect("empty");
        assert!(empty.stable.is_none() && empty.canary.is_none());
        assert_eq!(empty.set_key(base).stable, guest::digest(base));
    }

    fn digest_ref(repo: &str) -> String {
        format!("127.0.0.1:5000/{repo}@{}", guest::digest(repo.as_bytes()))
    }

    #[test]
    fn a_guest_by_reference_is_pulled_and_recorded_as_its_reference() {
        let mut source = cm(&[], &["guest.wasm.sig", "canary.wasm"]);
        let stable = digest_ref("stable");
        source.data = Some(BTreeMap::from([("guest.ref".to_owned(), stable.clone())]));
        let refs = references(&source).expect("well-formed");
        let pinned = Pinned::parse(&stable).expect("pinned");
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].1, pinned);
        let missing = Contents::parse(&source, &Pulled::new()).expect_err("not pulled");
        assert!(missing.contains("was not pulled"), "{missing}");
        let pulled = Pulled::from([(pinned.clone(), b"component".to_vec().into())]);
        let contents = Contents::parse(&source, &pulled).expect("pulled");
        let guest = contents.stable.as_ref().expect("a stable guest");
        assert_eq!(&*guest.wasm, b"component");
        assert_eq!(guest.signature.as_deref(), Some(&b"guest.wasm.sig"[..]));
        assert!(
            contents
                .canary
                .as_ref()
                .expect("canary")
                .guest
                .reference
                .is_none()
        );

        let record = contents.to_configmap("r");
        assert_eq!(record.data.as_ref().expect("data")["guest.ref"], stable);
        let binary = record.binary_data.as_ref().expect("binaryData");
        assert!(
            !binary.contains_key("guest.wasm"),
            "the record holds the reference"
        );
        let back = Contents::parse(&record, &contents.pulled()).expect("well-formed");
        assert_eq!(back.set_key(b"base"), contents.set_key(b"base"));
    }

    #[test]
    fn a_reference_is_pinned_by_digest_and_alone_in_its_role() {
        let with = |data: &[(&str, String)], binary: &[&str]| {
            let mut source = cm(&[], binary);
            source.data = Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            );
            source
        };
        let tag = with(&[("guest.ref", "127.0.0.1:5000/g:v1".to_owned())], &[]);
        let why = references(&tag).expect_err("a tag");
        assert!(
            why.contains("`guest.ref`") && why.contains("no digest"),
            "{why}"
        );
        let both = with(&[("guest.ref", digest_ref("g"))], &["guest.wasm"]);
        let why = malformed(&both).expect("both");
        assert!(why.contains("not both"), "{why}");
        let signed = with(&[("canary.ref", digest_ref("c"))], &["canary.wasm.sig"]);
        assert_eq!(malformed(&signed), None, "a signature beside a reference");
        let binary_ref = cm(&[], &["guest.ref"]);
        assert!(
            malformed(&binary_ref)
                .expect("binary")
                .contains("belongs under data")
        );
    }
}
