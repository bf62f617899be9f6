//! The registry client: pulls a pinned wasm artifact (manifest digest checked, layer size
//! bounded, layer digest checked) and pushes one. Built on `oci-client`, over the rustls + ring
//! TLS stack the Kubernetes client uses, with an optional CA bundle for private registries.

use std::path::PathBuf;

use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use tracing::debug;

use super::reference::{Pinned, Tagged};
use super::{Credentials, Error, Limits, artifact};
use crate::guest;

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Credentials by registry host; anonymous for the others.
    pub credentials: Credentials,
    /// Extra CA certificates (PEM) to trust, for a registry with a private CA.
    pub ca_file: Option<PathBuf>,
    /// Bounds on what is pulled.
    pub limits: Limits,
}

/// A client for wasm artifacts in OCI registries.
pub struct Registry {
    client: oci_client::Client,
    credentials: Credentials,
    limits: Limits,
}

/// A pulled artifact: its manifest and the component, both verified.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The manifest, as received (it hashes to the pinned digest).
    pub manifest: Vec<u8>,
    /// The component (it hashes to the manifest's layer digest).
    pub wasm: Vec<u8>,
}

impl Registry {
    /// A client with `options`; fails only when the CA bundle cannot be read.
    pub fn new(options: Options) -> Result<Self, Error> {
        // NB: reqwest is built without a crypto provider of its own (one TLS stack in the
        // binary); ring is the one kube uses. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut extra_root_certificates = Vec::new();
        if let Some(path) = &options.ca_file {
            let data = std::fs::read(path).map_err(|source| Error::Ca {
                path: path.clone(),
                source,
            })?;
            extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        let config = ClientConfig {
            protocol: ClientProtocol::Https,
            extra_root_certificates,
            // NB: a guest is one artifact; an index (a multi-platform image) is refused by
            // `artifact::wasm_layer`, never resolved to some platform's manifest.
            platform_resolver: None,
            connect_timeout: Some(std::time::Duration::from_secs(10)),
            read_timeout: Some(std::time::Duration::from_secs(30)),
            ..ClientConfig::default()
        };
        Ok(Self {
            client: oci_client::Client::new(config),
            credentials: options.credentials,
            limits: options.limits,
        })
    }

    /// A client without credentials or extra CA, with the default limits.
    pub fn anonymous() -> Self {
        Self::new(Options::default()).expect("no CA file to read")
    }

    fn auth(&self, registry: &str) -> RegistryAuth {
        self.credentials.auth(registry)
    }

    /// Pulls the manifest `reference` pins, checks it hashes to the pinned digest and describes
    /// a wasm artifact; returns it and its wasm layer.
    pub async fn pull_manifest(
        &self,
        reference: &Pinned,
    ) -> Result<(Vec<u8>, OciDescriptor), Error> {
        let image = reference.to_client();
        let auth = self.auth(reference.registry());
        let (manifest, _) = self
            .client
            .pull_manifest_raw(&image, &auth, &[artifact::MANIFEST])
            .await
            .map_err(|e| classify(reference, "manifest", e))?;
        // NB: the client checks this too; the pin is this module's promise, so check it here.
        let actual = guest::digest(&manifest);
        if actual != reference.digest() {
            return Err(Error::ManifestDigest {
                reference: reference.to_string(),
                actual,
            });
        }
        let layer = artifact::wasm_layer(&manifest).map_err(|why| Error::NotWasm {
            reference: reference.to_string(),
            why,
        })?;
        Ok((manifest.to_vec(), layer))
    }

    /// Pulls the component `layer` describes, reading no more than the size limit, and checks
    /// its size and digest.
    pub async fn pull_layer(
        &self,
        reference: &Pinned,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, Error> {
        let limit = self.limits.max_guest_bytes;
        let too_large = |seen: String| Error::TooLarge {
            reference: reference.to_string(),
            limit,
            seen,
        };
        let declared = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if declared > limit {
            return Err(too_large(format!("its manifest declares {declared} bytes")));
        }
        let image = reference.to_client();
        let mut stream = self
            .client
            .pull_blob_stream(&image, layer)
            .await
            .map_err(|e| classify(reference, "wasm layer", e))?;
        if let Some(length) = stream.content_length.filter(|l| *l > limit) {
            return Err(too_large(format!("the registry sends {length} bytes")));
        }
        let mut wasm = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        while let Some(chunk) = stream.stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // NB: the client's own digest check fails the stream at its end; report the
                // mismatch from our own hash below rather than as an I/O error.
                Err(e) if e.to_string().contains("igest") => break,
                Err(e) => {
                    return Err(classify(
                        reference,
                        "wasm layer",
                        OciDistributionError::IoError(e),
                    ));
                }
            };
            if (wasm.len() + chunk.len()) as u64 > limit {
                return Err(too_large(format!("the registry sent over {limit} bytes")));
            }
            wasm.extend_from_slice(&chunk);
        }
        let actual = guest::digest(&wasm);
        if actual != layer.digest || wasm.len() as u64 != declared {
            return Err(Error::LayerDigest {
                reference: reference.to_string(),
                expected: layer.digest.clone(),
                actual: format!("{actual} ({} bytes, {declared} declared)", wasm.len()),
            });
        }
        Ok(wasm)
    }

    /// Pulls and verifies the artifact `reference` pins.
    pub async fn pull(&self, reference: &Pinned) -> Result<Pulled, Error> {
        let (manifest, layer) = self.pull_manifest(reference).await?;
        let wasm = self.pull_layer(reference, &layer).await?;
        debug!(reference = %reference, bytes = wasm.len(), "pulled guest");
        Ok(Pulled { manifest, wasm })
    }

    /// Pushes `wasm` as a wasm OCI artifact to `target` ([`artifact::build`]); returns the
    /// reference pinned to the manifest's digest.
    pub async fn push(&self, target: &Tagged, wasm: &[u8]) -> Result<Pinned, Error> {
        let (config, manifest) = artifact::build(&guest::digest(wasm), wasm.len());
        self.push_manifest(target, &manifest, &[&config, wasm])
            .await
    }

    /// Pushes `blobs` and then `manifest` (raw JSON, an OCI image manifest naming them) to
    /// `target`; returns the reference pinned to the manifest's digest. [`Registry::push`]
    /// for a component; any other artifact for tests and tooling.
    pub async fn push_manifest(
        &self,
        target: &Tagged,
        manifest: &[u8],
        blobs: &[&[u8]],
    ) -> Result<Pinned, Error> {
        let image = target.to_client();
        let digest = guest::digest(manifest);
        let pinned = target.pinned(&digest)?;
        let fail = |e| classify(&pinned, "upload", e);
        self.client
            .auth(
                &image,
                &self.auth(&target.registry),
                oci_client::RegistryOperation::Push,
            )
            .await
            .map_err(fail)?;
        for blob in blobs {
            let blob_digest = guest::digest(blob);
            if !self
                .client
                .blob_exists(&image, &blob_digest)
                .await
                .map_err(fail)?
            {
                self.client
                    .push_blob(&image, blob.to_vec(), &blob_digest)
                    .await
                    .map_err(fail)?;
            }
        }
        let content_type = http::HeaderValue::from_static(artifact::MANIFEST);
        self.client
            .push_manifest_raw(&image, manifest.to_vec(), content_type)
            .await
            .map_err(fail)?;
        Ok(pinned)
    }

    /// The digest `target`'s tag points at now.
    pub async fn resolve(&self, target: &Tagged) -> Result<Pinned, Error> {
        let image = target.to_client();
        let auth = self.auth(&target.registry);
        let fail = |e| Error::Registry {
            reference: target.to_string(),
            source: e,
        };
        let digest = self
            .client
            .fetch_manifest_digest(&image, &auth)
            .await
            .map_err(fail)?;
        target.pinned(&digest)
    }
}

/// The error `err` from the client means, pulling or pushing `what` of `reference`.
fn classify(reference: &Pinned, what: &'static str, err: OciDistributionError) -> Error {
    let reference = reference.to_string();
    let any_code = |f: fn(&OciErrorCode) -> bool| match &err {
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().any(|e| f(&e.code))
        }
        _ => false,
    };
    let denied = any_code(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied));
    let unknown = any_code(|c| {
        matches!(
            c,
            OciErrorCode::ManifestUnknown | OciErrorCode::BlobUnknown | OciErrorCode::NameUnknown
        )
    });
    match &err {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_)
        | OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => Error::Unauthorized {
            reference,
            source: err,
        },
        _ if denied => Error::Unauthorized {
            reference,
            source: err,
        },
        OciDistributionError::ImageManifestNotFoundError(_)
        | OciDistributionError::ServerError { code: 404, .. } => Error::NotFound {
            reference,
            what,
            source: err,
        },
        _ if unknown => Error::NotFound {
            reference,
            what,
            source: err,
        },
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
            actual,
            ..
        }) => Error::ManifestDigest {
            reference,
            actual: actual.clone(),
        },
        _ => Error::Registry {
            reference,
            source: err,
        },
    }
}
