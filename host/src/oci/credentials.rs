//! Registry credentials in the docker config format (`~/.docker/config.json`, and the
//! `.dockerconfigjson` key of a Secret of type `kubernetes.io/dockerconfigjson`): user and
//! password by registry host. Credential helpers and identity tokens are not read.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use super::Error;

/// The Secret type that holds a docker config.
pub const SECRET_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// Its key.
pub const SECRET_KEY: &str = ".dockerconfigjson";

/// User and password by registry host; none means anonymous pulls. Debug hides the passwords.
#[derive(Clone, Default)]
pub struct Credentials {
    by_host: BTreeMap<String, (String, String)>,
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Credentials {
    /// Reads a docker config; `from` names its origin in errors.
    pub fn parse(json: &[u8], from: &str) -> Result<Self, Error> {
        let bad = |why: String| Error::Credentials {
            from: from.to_owned(),
            why,
        };
        let config: DockerConfig =
            serde_json::from_slice(json).map_err(|e| bad(format!("not a docker config: {e}")))?;
        let mut by_host = BTreeMap::new();
        for (key, entry) in config.auths {
            let pair = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) => {
                    let decoded = STANDARD
                        .decode(auth.trim())
                        .map_err(|e| bad(format!("`auth` of {key} is not base64: {e}")))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| bad(format!("`auth` of {key} is not UTF-8")))?;
                    let (user, password) = text
                        .split_once(':')
                        .ok_or_else(|| bad(format!("`auth` of {key} is not user:password")))?;
                    (user.to_owned(), password.to_owned())
                }
                (None, Some(user), Some(password)) => (user, password),
                _ => continue,
            };
            by_host.insert(host(&key).to_owned(), pair);
        }
        Ok(Self { by_host })
    }

    /// Reads the docker config file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let from = path.display().to_string();
        let json = std::fs::read(path).map_err(|e| Error::Credentials {
            from: from.clone(),
            why: e.to_string(),
        })?;
        Self::parse(&json, &from)
    }

    /// Reads Secret `namespace/name`, of type [`SECRET_TYPE`].
    pub async fn from_secret(client: &Client, namespace: &str, name: &str) -> Result<Self, Error> {
        let from = format!("Secret {namespace}/{name}");
        let bad = |why: String| Error::Credentials {
            from: from.clone(),
            why,
        };
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let secret = api.get(name).await.map_err(|e| bad(e.to_string()))?;
        if secret.type_.as_deref() != Some(SECRET_TYPE) {
            return Err(bad(format!(
                "its type is {:?}, not {SECRET_TYPE}",
                secret.type_.unwrap_or_default()
            )));
        }
        let json = secret
            .data
            .as_ref()
            .and_then(|d| d.get(SECRET_KEY))
            .ok_or_else(|| bad(format!("it has no {SECRET_KEY} key")))?;
        Self::parse(&json.0, &from)
    }

    /// How to authenticate to `registry`.
    pub fn auth(&self, registry: &str) -> RegistryAuth {
        match self.by_host.get(registry) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("registries", &self.by_host.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The host of a docker config key: `https://index.docker.io/v1/` is `index.docker.io`.
fn host(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use oci_client::secrets::RegistryAuth;

    use super::Credentials;

    #[test]
    fn both_forms_of_an_entry_are_read_by_host() {
        // "dTpw" is base64 of "u:p".
        let json = br#"{"auths": {
            "127.0.0.1:5000": {"auth": "dTpw"},
            "https://ghcr.io/v1/": {"username": "a", "password": "b:c"},
            "helper.example": {}
        }}"#;
        let creds = Credentials::parse(json, "test").expect("parses");
        let basic = |u: &str, p: &str| RegistryAuth::Basic(u.into(), p.into());
        assert_eq!(creds.auth("127.0.0.1:5000"), basic("u", "p"));
        assert_eq!(creds.auth("ghcr.io"), basic("a", "b:c"));
        assert_eq!(creds.auth("helper.example"), RegistryAuth::Anonymous);
        assert!(
            !format!("{creds:?}").contains("b:c"),
            "no password in Debug"
        );
        let bad = Credentials::parse(br#"{"auths": {"h": {"auth": "!!"}}}"#, "f")
            .expect_err("not base64");
        assert!(bad.to_string().contains("from f"), "{bad}");
    }
}
