//! A namespace of its own for each test, deleted when the test ends.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use crate::wait;

/// The label every test namespace carries, to find leftovers: `kubectl delete ns -l <label>`.
pub const TEST_LABEL: &str = "app-operator.e2e/test";

/// A namespace with a random suffix, created for one test.
///
/// Dropping it deletes the namespace (without waiting for it to terminate), also when the test
/// panics; the objects in it go with it.
pub struct TestNamespace {
    name: String,
}

impl TestNamespace {
    /// Creates namespace `<prefix>-<random suffix>` and waits for its `default` ServiceAccount,
    /// so that Pods can be created in it at once. `prefix` must be a DNS label of at most 50
    /// characters, usually the test's name.
    pub async fn create(client: &Client, prefix: &str) -> anyhow::Result<Self> {
        let name = format!("{prefix}-{}", random_suffix());
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(TEST_LABEL.to_owned(), prefix.to_owned())])),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("failed to create namespace {name}"))?;
        let namespace = Self { name };
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &namespace.name);
        wait::until(
            &format!("ServiceAccount default in namespace {}", namespace.name),
            Duration::from_secs(60),
            || async { Ok(accounts.get_opt("default").await?) },
        )
        .await?;
        Ok(namespace)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // NB: Drop cannot await, and the test's runtime may be shutting down; delete from a
        // thread with its own runtime and client.
        let name = self.name.clone();
        let deleted = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let client = crate::client().await?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await?;
                anyhow::Ok(())
            })
        })
        .join();
        match deleted {
            Ok(Ok(())) => {}
            Ok(Err(err)) => eprintln!("failed to delete test namespace {}: {err:#}", self.name),
            Err(_) => eprintln!("failed to delete test namespace {}: panicked", self.name),
        }
    }
}

/// Eight random lowercase hex digits (std's per-process random hash keys, no extra crate).
fn random_suffix() -> String {
    let bits = RandomState::new().hash_one(std::time::SystemTime::now());
    format!("{:08x}", bits as u32)
}
