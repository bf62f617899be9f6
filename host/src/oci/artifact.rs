//! The CNCF wasm OCI artifact layout: an OCI image manifest whose config has media type
//! [`WASM_CONFIG`] and whose one layer, [`WASM_LAYER`], is the component. What `wkg oci push`
//! (wasm-pkg-tools) writes; `oras push x.wasm:application/wasm` writes the same layer with the
//! empty config ([`EMPTY_CONFIG`]), which is accepted too.

use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde_json::json;

/// Media type of the manifest this module reads and writes.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Config media type of a wasm OCI artifact.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The OCI empty config (`oras push` without `--config`).
pub const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
/// Media type of the layer that holds the component.
pub const WASM_LAYER: &str = "application/wasm";

/// The wasm layer `manifest` (raw JSON) describes, or why it is not a wasm artifact.
pub fn wasm_layer(manifest: &[u8]) -> Result<OciDescriptor, String> {
    let value: serde_json::Value =
        serde_json::from_slice(manifest).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    if value.get("manifests").is_some() {
        return Err("it is an image index, not one artifact".to_owned());
    }
    let manifest: OciImageManifest = serde_json::from_value(value)
        .map_err(|e| format!("the manifest is not an OCI image manifest: {e}"))?;
    let config = manifest.config.media_type.as_str();
    if config != WASM_CONFIG && config != EMPTY_CONFIG {
        return Err(format!(
            "its config is `{config}` (a container image?), not `{WASM_CONFIG}`"
        ));
    }
    let mut wasm = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER);
    match (wasm.next(), wasm.next()) {
        (Some(layer), None) if layer.size >= 0 => Ok(layer.clone()),
        (Some(_), None) => Err("its wasm layer declares a negative size".to_owned()),
        (Some(_), Some(_)) => Err(format!("it has several `{WASM_LAYER}` layers")),
        (None, _) => {
            let types: Vec<_> = manifest
                .layers
                .iter()
                .map(|l| l.media_type.as_str())
                .collect();
            Err(format!(
                "it has no `{WASM_LAYER}` layer (layers: {types:?})"
            ))
        }
    }
}

/// The config blob and the manifest of a wasm artifact holding a component of digest
/// `component_digest` and `size` bytes. Both are fixed functions of the component (the
/// `created` time is the epoch), so pushing the same component twice yields the same digest.
pub fn build(component_digest: &str, size: usize) -> (Vec<u8>, Vec<u8>) {
    let config = json!({
        "created": "1970-01-01T00:00:00Z",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [component_digest],
    });
    let config = serde_json::to_vec(&config).expect("a JSON value serializes");
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {
            "mediaType": WASM_CONFIG,
            "digest": crate::guest::digest(&config),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": WASM_LAYER,
            "digest": component_digest,
            "size": size,
        }],
    });
    let manifest = serde_json::to_vec(&manifest).expect("a JSON value serializes");
    (config, manifest)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{build, wasm_layer};

    #[test]
    fn a_built_manifest_reads_back_as_its_layer() {
        let (config, manifest) = build("sha256:aa", 12);
        let layer = wasm_layer(&manifest).expect("a wasm artifact");
        assert_eq!((layer.digest.as_str(), layer.size), ("sha256:aa", 12));
        assert_eq!(build("sha256:aa", 12), (config, manifest), "reproducible");
    }

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        let layers: Vec<_> = layers
            .iter()
            .map(|t| json!({ "mediaType": t, "digest": "sha256:bb", "size": 3 }))
            .collect();
        serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": { "mediaType": config, "digest": "sha256:cc", "size": 2 },
            "layers": layers,
        }))
        .expect("serializes")
    }

    #[test]
    fn only_one_wasm_layer_under_a_wasm_or_empty_config_is_a_guest() {
        let oras = manifest("application/vnd.oci.empty.v1+json", &["application/wasm"]);
        assert!(wasm_layer(&oras).is_ok());
        let image = manifest(
            "application/vnd.oci.image.config.v1+json",
            &["application/vnd.oci.image.layer.v1.tar+gzip"],
        );
        let why = wasm_layer(&image).expect_err("an image");
        assert!(why.contains("container image"), "{why}");
        let two = manifest(
            "application/vnd.wasm.config.v0+json",
            &["application/wasm", "application/wasm"],
        );
        assert!(wasm_layer(&two).expect_err("two").contains("several"));
        let none = manifest("application/vnd.wasm.config.v0+json", &["text/plain"]);
        assert!(wasm_layer(&none).expect_err("none").contains("text/plain"));
        let index = serde_json::to_vec(&json!({ "schemaVersion": 2, "manifests": [] }))
            .expect("serializes");
        assert!(wasm_layer(&index).expect_err("index").contains("index"));
        assert!(wasm_layer(b"nope").is_err());
    }
}
