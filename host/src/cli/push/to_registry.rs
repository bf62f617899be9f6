//! `guest push --to`: the registry half of a push. The component goes to the registry as a wasm
//! OCI artifact, the tag is resolved to the manifest digest there and then, and the ConfigMap
//! gets that digest reference in place of the bytes; the operator never sees the tag.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::Args;
use crate::Result;
use crate::consts::{CANARY_KEY, CANARY_REF_KEY, GUEST_KEY, GUEST_REF_KEY};
use crate::oci::Pinned;
use crate::oci::reference::Tagged;

/// Pushes `wasm` to `--to`, when given; returns the reference pinned to what was pushed.
pub(super) async fn upload(args: &Args, wasm: &[u8]) -> Result<Option<Pinned>> {
    let Some(to) = &args.to else {
        return Ok(None);
    };
    let target = Tagged::parse(to)?;
    let registry = args.registry.registry()?;
    let pinned = registry.push(&target, wasm).await?;
    // NB: the digest is the one of the manifest written, not a fresh look-up of the tag, which
    // another push may have moved meanwhile.
    println!("pushed {target} as {pinned}");
    Ok(Some(pinned))
}

/// Puts the guest of the role pushed (`canary` or the stable one) by `reference` when there is
/// one (dropping its inline bytes), else leaves it inline (dropping a reference of that role).
/// Pushing the stable guest drops the canary's reference as it drops the canary's bytes.
pub(super) fn place(cm: &mut ConfigMap, canary: bool, reference: Option<&Pinned>) {
    let (inline, by_ref) = if canary {
        (CANARY_KEY, CANARY_REF_KEY)
    } else {
        (GUEST_KEY, GUEST_REF_KEY)
    };
    let data = cm.data.get_or_insert_with(BTreeMap::new);
    if !canary {
        data.remove(CANARY_REF_KEY);
    }
    match reference {
        Some(pinned) => {
            data.insert(by_ref.to_owned(), pinned.to_string());
            if let Some(binary) = cm.binary_data.as_mut() {
                binary.remove(inline);
            }
        }
        None => {
            data.remove(by_ref);
        }
    }
    if cm.data.as_ref().is_some_and(BTreeMap::is_empty) {
        cm.data = None;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::place;
    use crate::oci::Pinned;

    fn keys(cm: &ConfigMap) -> (Vec<&str>, Vec<&str>) {
        let data = cm.data.iter().flat_map(|d| d.keys()).map(String::as_str);
        let binary = cm
            .binary_data
            .iter()
            .flat_map(|d| d.keys())
            .map(String::as_str);
        (data.collect(), binary.collect())
    }

    #[test]
    fn a_reference_replaces_the_bytes_of_its_role_and_back() {
        let pinned = Pinned::parse(&format!("localhost:5000/g@{}", crate::guest::digest(b"m")))
            .expect("pinned");
        let mut cm = ConfigMap {
            binary_data: Some(
                ["guest.wasm", "guest.wasm.sig", "canary.wasm"]
                    .map(|k| (k.to_owned(), ByteString(vec![1])))
                    .into(),
            ),
            ..ConfigMap::default()
        };
        place(&mut cm, true, Some(&pinned));
        assert_eq!(
            keys(&cm),
            (vec!["canary.ref"], vec!["guest.wasm", "guest.wasm.sig"])
        );
        place(&mut cm, false, Some(&pinned));
        assert_eq!(keys(&cm), (vec!["guest.ref"], vec!["guest.wasm.sig"]));
        place(&mut cm, false, None);
        assert_eq!(keys(&cm), (vec![], vec!["guest.wasm.sig"]));
    }
}
