//! An OCI reference pinned by digest, `registry/repository@sha256:<hex>`: the only form the
//! operator runs. A tag is resolved to a digest once, at push time.

use std::fmt;

use super::Error;

/// A reference to one manifest by its sha256 digest. Displayed as written canonically.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pinned {
    registry: String,
    repository: String,
    digest: String,
}

impl Pinned {
    /// Parses `text`; a tag (alone or beside the digest), a missing registry host or a digest
    /// that is not `sha256:` and 64 lower-case hex digits is refused.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let refuse = |why: &str| Error::Reference {
            reference: text.to_owned(),
            why: why.to_owned(),
        };
        let (name, digest) = text.split_once('@').ok_or_else(|| {
            refuse("no digest (a tag is resolved to a digest by `guest push --to`)")
        })?;
        let hex = digest
            .strip_prefix("sha256:")
            .ok_or_else(|| refuse("the digest is not sha256"))?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(refuse("the digest is not 64 lower-case hex digits"));
        }
        let (registry, repository) = name
            .split_once('/')
            .ok_or_else(|| refuse("no registry host before the repository"))?;
        if !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(refuse("the first part is not a registry host"));
        }
        // NB: a tag is `:` after the last `/`; a port is `:` in the registry part.
        if repository.contains(':') {
            return Err(refuse("it names a tag as well; only the digest is run"));
        }
        if repository.is_empty()
            || !repository
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' | b'/'))
        {
            return Err(refuse("the repository is not lower-case [a-z0-9._-/]"));
        }
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            digest: digest.to_owned(),
        })
    }

    /// The manifest digest, `sha256:<hex>`.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The registry host (and port).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository within the registry.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The reference for the client.
    pub(super) fn to_client(&self) -> oci_client::Reference {
        oci_client::Reference::with_digest(
            self.registry.clone(),
            self.repository.clone(),
            self.digest.clone(),
        )
    }
}

impl fmt::Display for Pinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{}", self.registry, self.repository, self.digest)
    }
}

/// `registry/repository:tag`, as `guest push --to` takes it: where to push, by tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tagged {
    /// The registry host (and port).
    pub registry: String,
    /// The repository.
    pub repository: String,
    /// The tag.
    pub tag: String,
}

impl Tagged {
    /// Parses `text`; without a tag, `latest` is not assumed: it is refused.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let refuse = |why: &str| Error::Reference {
            reference: text.to_owned(),
            why: why.to_owned(),
        };
        let (registry, rest) = text
            .split_once('/')
            .ok_or_else(|| refuse("no registry host before the repository"))?;
        let (repository, tag) = rest
            .rsplit_once(':')
            .ok_or_else(|| refuse("no tag to push to (registry/repository:tag)"))?;
        if repository.is_empty() || tag.is_empty() || repository.contains('@') {
            return Err(refuse("expected registry/repository:tag"));
        }
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.to_owned(),
        })
    }

    /// The reference pinned to `digest` in the same repository.
    pub fn pinned(&self, digest: &str) -> Result<Pinned, Error> {
        Pinned::parse(&format!("{}/{}@{digest}", self.registry, self.repository))
    }

    pub(super) fn to_client(&self) -> oci_client::Reference {
        oci_client::Reference::with_tag(
            self.registry.clone(),
            self.repository.clone(),
            self.tag.clone(),
        )
    }
}

impl fmt::Display for Tagged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}:{}", self.registry, self.repository, self.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::{Pinned, Tagged};

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn only_a_digest_pinned_reference_parses() {
        let text = format!("127.0.0.1:5000/guests/tiered@sha256:{HEX}");
        let pinned = Pinned::parse(&text).expect("pinned");
        assert_eq!(pinned.registry(), "127.0.0.1:5000");
        assert_eq!(pinned.repository(), "guests/tiered");
        assert_eq!(pinned.to_string(), text);
        for (bad, why) in [
            ("ghcr.io/a/b:v1".to_owned(), "no digest"),
            (format!("ghcr.io/a/b:v1@sha256:{HEX}"), "names a tag"),
            (format!("ghcr.io/a/b@sha512:{HEX}"), "not sha256"),
            ("ghcr.io/a/b@sha256:abc".to_owned(), "64 lower-case"),
            (
                format!("ghcr.io/a/b@sha256:{}", HEX.to_uppercase()),
                "64 lower-case",
            ),
            (format!("guests/b@sha256:{HEX}"), "not a registry host"),
            (format!("b@sha256:{HEX}"), "no registry host"),
            (format!("ghcr.io/A/b@sha256:{HEX}"), "lower-case"),
        ] {
            let err = Pinned::parse(&bad).expect_err(&bad).to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn a_push_target_needs_a_tag() {
        let tagged = Tagged::parse("localhost:5000/guests/x:v1").expect("tagged");
        assert_eq!(tagged.repository, "guests/x");
        assert_eq!(tagged.tag, "v1");
        let pinned = tagged.pinned(&format!("sha256:{HEX}")).expect("pinned");
        assert_eq!(
            pinned.to_string(),
            format!("localhost:5000/guests/x@sha256:{HEX}")
        );
        assert!(Tagged::parse("localhost:5000/guests/x").is_err());
    }
}
