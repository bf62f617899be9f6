//! The on-disk cache of pulled guests, keyed by digest: `manifests/sha256/<hex>` holds a
//! manifest, `blobs/sha256/<hex>` a component. Both are content-addressed, so an entry never
//! goes stale; an entry that does not hash to its name (a torn write, a tampered disk) is a
//! miss and is removed. The precompiled form is cached apart, by the guest loader
//! (`--guest-cache-dir`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use tracing::warn;

use super::client::Pulled;
use super::{Error, Pinned, artifact};
use crate::guest;

/// A cache directory.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, kind: &str, digest: &str) -> PathBuf {
        let (algorithm, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        self.dir.join(kind).join(algorithm).join(hex)
    }

    /// The artifact `reference` pins, if the cache holds all of it intact.
    pub fn get(&self, reference: &Pinned) -> Option<Pulled> {
        let manifest = self.read("manifests", reference.digest())?;
        let layer = artifact::wasm_layer(&manifest).ok()?;
        let wasm = self.read("blobs", &layer.digest)?;
        Some(Pulled { manifest, wasm })
    }

    /// Stores a pulled (verified) artifact.
    pub fn put(&self, reference: &Pinned, pulled: &Pulled) -> Result<(), Error> {
        self.write("manifests", reference.digest(), &pulled.manifest)?;
        self.write("blobs", &guest::digest(&pulled.wasm), &pulled.wasm)
    }

    /// The bytes stored under `digest`, if they hash to it.
    fn read(&self, kind: &str, digest: &str) -> Option<Vec<u8>> {
        let path = self.path(kind, digest);
        let bytes = fs::read(&path).ok()?;
        if guest::digest(&bytes) == digest {
            return Some(bytes);
        }
        warn!(path = %path.display(), digest, "cached guest file does not match its digest; removing it");
        let _ = fs::remove_file(&path);
        None
    }

    fn write(&self, kind: &str, digest: &str, bytes: &[u8]) -> Result<(), Error> {
        let path = self.path(kind, digest);
        let fail = |source| Error::Cache {
            path: path.clone(),
            source,
        };
        let parent = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(parent).map_err(fail)?;
        // NB: write aside and rename, so a reader never sees half a file under the final name.
        let tmp = parent.join(format!(
            ".{}.tmp{}",
            digest.replace(':', "-"),
            std::process::id()
        ));
        let written = fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
        written.and_then(|()| fs::rename(&tmp, &path)).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            fail(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Cache;
    use crate::oci::client::Pulled;
    use crate::oci::{Pinned, artifact};

    #[test]
    fn an_entry_reads_back_until_it_is_tampered_with() {
        let dir = std::env::temp_dir().join(format!("oci-cache-test-{}", std::process::id()));
        let cache = Cache::new(&dir);
        let wasm = b"\0asm component".to_vec();
        let (_, manifest) = artifact::build(&crate::guest::digest(&wasm), wasm.len());
        let reference = Pinned::parse(&format!(
            "localhost:5000/g@{}",
            crate::guest::digest(&manifest)
        ))
        .expect("pinned");
        assert!(cache.get(&reference).is_none(), "empty");
        let pulled = Pulled { manifest, wasm };
        cache.put(&reference, &pulled).expect("writes");
        assert_eq!(cache.get(&reference).expect("a hit").wasm, pulled.wasm);
        let blob = cache.path("blobs", &crate::guest::digest(&pulled.wasm));
        std::fs::write(&blob, b"tampered").expect("overwrites");
        assert!(
            cache.get(&reference).is_none(),
            "a tampered entry is a miss"
        );
        assert!(!blob.exists(), "and is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
