//! The sandboxed guest runtime: the only module that touches wasmtime.
//!
//! One [`Runtime`] per process holds the engine. [`Runtime::load`] compiles a guest once per
//! digest (or loads it precompiled from the disk cache) and pre-links it into a [`Policy`].
//! Every [`Policy::render`] runs in a fresh Store and instance, with an epoch deadline, a memory
//! cap and optional fuel, off the async runtime, and validates the output before returning it.
//! The runtime's memory budget bounds how many instances exist at once (see
//! [`Config::instances`]), whoever calls: the controller, the swap's dry run, `plan`.
//!
//! Work that compiles or runs a guest comes in two forms, like tokio's own: the async one
//! ([`Runtime::load`], [`Runtime::load_default`], [`Runtime::inspect`], [`Policy::render`])
//! runs it on the blocking pool and is what async code calls; the `_blocking` one
//! ([`Runtime::load_blocking`], [`Policy::render_blocking`], ...) runs it on the caller's
//! thread, for synchronous code: tools, benchmarks, tests. Async code calls the async form
//! rather than wrapping the other in `spawn_blocking` or `block_in_place`.
//!
//! ```ignore
//! let runtime = guest::Runtime::new(guest::Config { cache_dir, ..guest::Config::default() })?;
//! let policy = runtime.load_default().await?; // or runtime.load(&wasm_bytes).await?
//! let desired = policy.render(&app).await?; // guest::Error::kind() for metric labels
//! let apply = stamp::children(&app, policy.digest(), desired); // what server-side apply sends
//! ```

pub mod admission;
mod bindings;
mod call;
pub mod compiler;
mod engine;
mod error;
mod inspect;
mod loader;
mod log_stream;
mod names;
pub mod report;
mod state;
mod validate;
mod wasi;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use self::call::Limits;
pub use self::error::{BoxError, Error, PolicyError};
pub use self::inspect::{Import, Inspection};
use self::loader::Pre;
pub use self::loader::digest;
pub use self::report::{Condition, ConditionStatus, Event, EventType, Report};
pub use self::validate::Violation;
use crate::crd::AppService;

/// The default guest, built from `guest/` by `build.rs` and embedded in the binary.
pub fn default_guest() -> &'static [u8] {
    include_bytes!(env!("APP_OPERATOR_DEFAULT_GUEST"))
}

/// Limits and settings of the runtime.
#[derive(Clone, Debug)]
pub struct Config {
    /// Wall-clock budget of one guest call; enforced with a granularity of 10 ms.
    pub deadline: Duration,
    /// Cap on one instance's memory, in bytes: every linear memory's size plus every table's
    /// elements (at [`TABLE_ELEMENT_BYTES`] each), as the Store's limiter sees them. A growth past
    /// it traps with [`Error::Memory`].
    pub memory_limit: usize,
    /// Cap on the memory all instances hold at once, in bytes: at most
    /// [`Config::instances`] = `memory_budget / memory_limit` guest calls run at once, and more
    /// wait for a slot. It must hold at least one instance.
    pub memory_budget: usize,
    /// Optional fuel budget per call (about 11 units per ns of guest CPU; the default guest
    /// uses about 50k per call).
    pub fuel: Option<u64>,
    /// Where precompiled guests are cached; `None` disables the disk cache.
    ///
    /// **Warning**: artifacts there are loaded as native code; the directory must be writable
    /// only by the operator.
    pub cache_dir: Option<PathBuf>,
    /// A read-only directory of guests precompiled ahead of time (`app-operator guest
    /// precompile`, as the image ships the default guest), looked in before the cache and the
    /// compiler; `None` has none. An artifact made for another engine (other settings, fewer CPU
    /// features) is not found, and the guest is compiled.
    ///
    /// **Warning**: as for `cache_dir`, artifacts there are loaded as native code.
    pub precompiled_dir: Option<PathBuf>,
    /// The program that compiles guests in a child process ([`compiler`]): the operator's own
    /// binary, run as `<program> guest compile`. `None` compiles in this process.
    pub compiler: Option<PathBuf>,
    /// `(apiVersion, kind)` pairs a guest may emit. Cluster-scoped and RBAC kinds are refused
    /// by [`Runtime::new`] even if listed here.
    pub allowed_kinds: Vec<(String, String)>,
    /// Cap on the total size of one call's output, in bytes.
    pub max_output_bytes: usize,
    /// What the output may contain: pod security, Services, ServiceAccounts, object count.
    pub output: admission::Config,
}

impl Default for Config {
    /// 100 ms deadline, 64 MiB memory per instance and a 256 MiB budget (4 instances at once),
    /// no fuel, no disk cache, nothing precompiled, compiled in this process, `apps/v1
    /// Deployment` and `v1 Service`, 1 MiB of output, the
    /// default [`admission::Config`].
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(100),
            memory_limit: DEFAULT_MEMORY_LIMIT,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            fuel: None,
            cache_dir: None,
            precompiled_dir: None,
            compiler: None,
            allowed_kinds: vec![
                ("apps/v1".into(), "Deployment".into()),
                ("v1".into(), "Service".into()),
            ],
            max_output_bytes: 1 << 20,
            output: admission::Config::default(),
        }
    }
}

impl Config {
    /// Guest instances that may exist at once: `memory_budget / memory_limit` (0 when the budget
    /// cannot hold one; [`Runtime::new`] refuses that).
    pub fn instances(&self) -> usize {
        self.memory_budget
            .checked_div(self.memory_limit)
            .unwrap_or_default()
    }
}

/// Default of [`Config::memory_limit`]: 64 MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 64 << 20;

/// Default of [`Config::memory_budget`]: 256 MiB, four instances of the default cap.
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;

/// Bytes one table element counts for in [`Config::memory_limit`]: the largest element wasmtime
/// stores (a continuation reference; a funcref takes 8).
pub const TABLE_ELEMENT_BYTES: usize = 16;

/// One object a guest wants to exist, before the host stamps ownership.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredObject {
    /// e.g. `apps/v1`.
    pub api_version: String,
    /// e.g. `Deployment`.
    pub kind: String,
    /// Object name (DNS-1123).
    pub name: String,
    /// The full object as JSON (validated), with `apiVersion`, `kind` and `metadata.name` set.
    pub body: serde_json::Value,
}

/// What one render produced, checked: the objects, and what a 0.2.0 guest reported besides
/// (empty for a 0.1.0 guest).
#[derive(Clone, Debug, PartialEq)]
pub struct Rendering {
    /// The validated, admitted objects.
    pub objects: Vec<DesiredObject>,
    /// The guest's conditions and Events, within the bounds of [`report`].
    pub report: Report,
}

/// Identifies one render: see [`Policy::render_key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RenderKey(u64);

impl RenderKey {
    /// A key made up for a test.
    #[cfg(test)]
    pub(crate) fn for_test(n: u64) -> Self {
        Self(n)
    }
}

/// The process-wide runtime: one engine, a compile cache. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

struct Shared {
    engine: wasmtime::Engine,
    config: Config,
    limits: Limits,
    permits: Arc<Semaphore>,
    /// Advances the epoch while a call runs.
    ticker: engine::Ticker,
    /// Loaded guests by digest. NB: it holds `Loaded`, not `Policy`, which would keep the
    /// runtime alive through a cycle; guests stay loaded for the runtime's lifetime.
    loaded: Mutex<HashMap<String, Arc<Loaded>>>,
}

impl Runtime {
    /// Builds the engine and starts its epoch ticker. Create one per process.
    pub fn new(config: Config) -> Result<Self, Error> {
        if let Some((a, k)) = config
            .allowed_kinds
            .iter()
            .find(|(a, k)| validate::is_forbidden(a, k))
        {
            return Err(Error::Config(format!(
                "{a} {k} is cluster-scoped or RBAC; guests may never emit it"
            )));
        }
        if let Some(problem) = config.output.problem() {
            return Err(Error::Config(problem));
        }
        if config.deadline.is_zero() || config.memory_limit == 0 || config.max_output_bytes == 0 {
            return Err(Error::Config(
                "deadline, memory_limit and max_output_bytes must be positive".into(),
            ));
        }
        let instances = config.instances();
        if instances == 0 {
            return Err(Error::Config(format!(
                "the guest memory budget of {} bytes cannot hold one instance of {} bytes",
                config.memory_budget, config.memory_limit
            )));
        }
        let engine = engine::build(&config, instances)?;
        let ticker = engine::Ticker::start(&engine)?;
        let limits = Limits {
            deadline: config.deadline,
            deadline_ticks: engine::deadline_ticks(config.deadline),
            memory_limit: config.memory_limit,
            fuel: config.fuel,
        };
        // NB: every instance is created under a permit (`Policy::render`) or on a caller's own
        // thread (`render_blocking`, tools and benchmarks only), so the pool never runs dry
        // in the operator, and the budget holds.
        let permits = Arc::new(Semaphore::new(instances));
        let loaded = Mutex::default();
        Ok(Self {
            shared: Arc::new(Shared {
                engine,
                config,
                limits,
                permits,
                ticker,
                loaded,
            }),
        })
    }

    /// Loads a guest component: compiled once per digest (or read precompiled from the disk
    /// cache) and pre-linked. The compile (tens of ms of CPU, or a child process) runs on the
    /// blocking pool, off the async workers; `wasm` moves there (an `Arc<[u8]>` or a
    /// `&'static [u8]` without a copy).
    pub async fn load(&self, wasm: impl AsRef<[u8]> + Send + 'static) -> Result<Policy, Error> {
        self.off_thread(wasm, Runtime::load_blocking).await
    }

    /// [`Runtime::load`] on the current thread, which it blocks for the compile: use it from
    /// blocking contexts only, e.g. tools, benchmarks and tests.
    pub fn load_blocking(&self, wasm: &[u8]) -> Result<Policy, Error> {
        let digest = loader::digest(wasm);
        if let Some(loaded) = self.cached(&digest) {
            return Ok(Policy {
                runtime: self.clone(),
                loaded,
            });
        }
        let engine = &self.shared.engine;
        let component = loader::compile(engine, &self.shared.config, wasm, &digest)?;
        let pre = loader::link(engine, &component, &digest)?;
        let inspection = inspect::inspect(engine, &component, &digest, wasm.len());
        let loaded = Arc::new(Loaded {
            digest: digest.as_str().into(),
            pre,
            inspection,
        });
        self.lock().insert(digest, loaded.clone());
        Ok(Policy {
            runtime: self.clone(),
            loaded,
        })
    }

    /// Compiles `wasm` (in this process) and writes the artifact into `dir`, where a runtime
    /// built with the same settings and `dir` as its [`Config::precompiled_dir`] (or
    /// [`Config::cache_dir`]) loads it without compiling. Fails, writing nothing, on a component
    /// that is no guest. Returns the artifact's path.
    pub fn precompile(&self, wasm: &[u8], dir: &Path) -> Result<PathBuf, Error> {
        let digest = loader::digest(wasm);
        loader::precompile(&self.shared.engine, dir, wasm, &digest)
    }

    /// Loads the embedded [`default_guest`], as [`Runtime::load`] does.
    pub async fn load_default(&self) -> Result<Policy, Error> {
        self.load(default_guest()).await
    }

    /// [`Runtime::load_default`] on the current thread, as [`Runtime::load_blocking`] does.
    pub fn load_default_blocking(&self) -> Result<Policy, Error> {
        self.load_blocking(default_guest())
    }

    /// Describes a component without requiring it to implement the contract. A component not
    /// loaded yet is compiled for it, on the blocking pool as in [`Runtime::load`].
    pub async fn inspect(
        &self,
        wasm: impl AsRef<[u8]> + Send + 'static,
    ) -> Result<Inspection, Error> {
        self.off_thread(wasm, Runtime::inspect_blocking).await
    }

    /// Runs `work` on this runtime and `wasm` on the blocking pool.
    async fn off_thread<T: Send + 'static>(
        &self,
        wasm: impl AsRef<[u8]> + Send + 'static,
        work: fn(&Runtime, &[u8]) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let this = self.clone();
        crate::runtime::blocking(move || work(&this, wasm.as_ref()))
            .await
            .map_err(Error::Task)?
    }

    /// [`Runtime::inspect`] on the current thread, which it blocks for the compile.
    pub fn inspect_blocking(&self, wasm: &[u8]) -> Result<Inspection, Error> {
        let digest = loader::digest(wasm);
        if let Some(loaded) = self.cached(&digest) {
            return Ok(loaded.inspection.clone());
        }
        let engine = &self.shared.engine;
        let component = loader::compile(engine, &self.shared.config, wasm, &digest)?;
        Ok(inspect::inspect(engine, &component, &digest, wasm.len()))
    }

    fn cached(&self, digest: &str) -> Option<Arc<Loaded>> {
        self.lock().get(digest).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Loaded>>> {
        // NB: the map is only read and inserted into; a panic elsewhere cannot leave it torn.
        self.shared
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A loaded guest, ready to be called. Cheap to clone.
#[derive(Clone)]
pub struct Policy {
    runtime: Runtime,
    loaded: Arc<Loaded>,
}

struct Loaded {
    digest: Arc<str>,
    pre: Pre,
    inspection: Inspection,
}

impl Policy {
    /// `sha256:<hex>` of the guest's bytes.
    pub fn digest(&self) -> &str {
        &self.loaded.digest
    }

    /// What identifies a render of `app` by this guest in a namespace at level `namespace`:
    /// this guest's digest, the level, and everything the guest is given of `app`. Two renders
    /// with the same key return the same result, since each call is a fresh instance that
    /// sees nothing but its input (a guest that reads the clock or random numbers through its
    /// WASI imports is the exception, and is taken at its first answer).
    pub fn render_key(&self, app: &AppService, namespace: Option<admission::Level>) -> RenderKey {
        use std::fmt::Write as _;
        use std::hash::{Hash, Hasher};

        /// Feeds formatted text to a hasher, so the input is hashed without a copy.
        struct Feed<'a>(&'a mut std::collections::hash_map::DefaultHasher);
        impl std::fmt::Write for Feed<'_> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                self.0.write(s.as_bytes());
                Ok(())
            }
        }

        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.digest().hash(&mut hasher);
        namespace.hash(&mut hasher);
        // NB: the input's Debug form names every field the guest receives, spec included,
        // whether or not the API server bumped the generation for it.
        let _ = write!(Feed(&mut hasher), "{:?}", bindings::to_input(app));
        RenderKey(hasher.finish())
    }

    /// What the guest is and imports.
    pub fn inspect(&self) -> &Inspection {
        &self.loaded.inspection
    }

    /// Renders an AppService into validated, admitted desired objects, in a fresh sandbox, off
    /// the async runtime. `namespace` is the level the AppService's namespace enforces (its
    /// `pod-security.kubernetes.io/enforce` label, see [`admission::namespace_level`]), if any;
    /// the stricter of it and the configured level applies. At most [`Config::instances`] calls
    /// per runtime run at once; more wait for a slot.
    pub async fn render(
        &self,
        app: &AppService,
        namespace: Option<admission::Level>,
    ) -> Result<Vec<DesiredObject>, Error> {
        Ok(self.render_reported(app, namespace).await?.objects)
    }

    /// [`Policy::render`], with what a 0.2.0 guest reports besides the objects: its conditions
    /// and Events, within the bounds of [`report`] (a report out of bounds fails the render
    /// with [`Error::InvalidOutput`]).
    pub async fn render_reported(
        &self,
        app: &AppService,
        namespace: Option<admission::Level>,
    ) -> Result<Rendering, Error> {
        let permits = self.runtime.shared.permits.clone();
        // NB: the semaphore is never closed, so acquiring only waits.
        let permit = permits
            .acquire_owned()
            .await
            .expect("the guest semaphore is never closed");
        let input = bindings::to_input(app);
        let this = self.clone();
        crate::runtime::blocking(move || {
            let _permit = permit;
            this.render_input(&input, namespace)
        })
        .await
        .map_err(Error::Task)?
    }

    /// [`Policy::render`] on the current thread. It blocks for the whole guest call (up to the
    /// deadline): use it from blocking contexts only, e.g. benchmarks and tests.
    pub fn render_blocking(
        &self,
        app: &AppService,
        namespace: Option<admission::Level>,
    ) -> Result<Vec<DesiredObject>, Error> {
        Ok(self
            .render_input(&bindings::to_input(app), namespace)?
            .objects)
    }

    /// For benchmarks only: [`Policy::render_blocking`] without the admission rules, to measure
    /// what they cost. Not part of the API.
    #[doc(hidden)]
    pub fn bench_render_unadmitted(&self, app: &AppService) -> Result<usize, Error> {
        let input = bindings::to_input(app);
        let raw = self.call(&input)?.map_err(|e| Error::Policy(e.into()))?;
        Ok(validate::validate(raw.objects, &self.rules(&input))?.len())
    }

    /// For benchmarks only: one fresh-Store guest call without output validation, returning
    /// the number of objects. Not part of the API.
    #[doc(hidden)]
    pub fn bench_call(&self, app: &AppService) -> Result<usize, Error> {
        Ok(self
            .call(&bindings::to_input(app))?
            .map_or(0, |raw| raw.objects.len()))
    }

    fn render_input(
        &self,
        input: &bindings::types::AppService,
        namespace: Option<admission::Level>,
    ) -> Result<Rendering, Error> {
        let raw = self.call(input)?.map_err(|e| Error::Policy(e.into()))?;
        let output = &self.runtime.shared.config.output;
        let level = output.level(namespace);
        // NB: the count is checked before any body is parsed.
        admission::admit_count(output, level, raw.objects.len())?;
        let objects = validate::validate(raw.objects, &self.rules(input))?;
        let report = report::check(raw.conditions, raw.events).map_err(Violation::from)?;
        admission::admit(output, level, &objects)?;
        Ok(Rendering { objects, report })
    }

    fn rules<'a>(&'a self, input: &'a bindings::types::AppService) -> validate::Rules<'a> {
        let config = &self.runtime.shared.config;
        validate::Rules {
            allowed_kinds: &config.allowed_kinds,
            namespace: input
                .metadata
                .namespace
                .as_deref()
                .unwrap_or(crate::consts::DEFAULT_NAMESPACE),
            max_output_bytes: config.max_output_bytes,
        }
    }

    fn call(&self, input: &bindings::types::AppService) -> Result<call::Output, Error> {
        let shared = &self.runtime.shared;
        let _ticking = shared.ticker.running();
        call::call(
            &shared.engine,
            &self.loaded.pre,
            &shared.limits,
            &self.loaded.digest,
            input,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_render_key_changes_with_anything_the_guest_is_given() {
        use kube::ResourceExt;

        let runtime = Runtime::new(Config::default()).expect("default config is valid");
        let policy = runtime
            .load_default_blocking()
            .expect("the default guest loads");
        let app = AppService::test();
        let key = |app: &AppService, level| policy.render_key(app, level);
        let base = key(&app, None);
        assert_eq!(base, key(&app.clone(), None), "the same input");

        let mut status = app.clone();
        status.status = Some(Default::default());
        status.metadata.resource_version = Some("9".into());
        assert_eq!(
            base,
            key(&status, None),
            "the guest sees no status or version"
        );

        let mut image = app.clone();
        image.spec.image = "nginx:1.28".into();
        let mut labelled = app.clone();
        labelled
            .labels_mut()
            .insert("track".into(), "canary".into());
        let newer = app.clone().at_generation(2);
        for (other, what) in [(image, "spec"), (labelled, "labels"), (newer, "generation")] {
            assert_ne!(base, key(&other, None), "{what}");
        }
        assert_ne!(base, key(&app, Some(admission::Level::Restricted)), "level");
    }

    #[test]
    fn dropping_runtime_and_policies_frees_the_engine() {
        let runtime = Runtime::new(Config::default()).expect("default config is valid");
        let policy = runtime
            .load_default_blocking()
            .expect("the default guest loads");
        let weak = runtime.shared.engine.weak();
        drop(runtime);
        assert!(weak.upgrade().is_some(), "a policy keeps its runtime");
        drop(policy);
        assert!(
            weak.upgrade().is_none(),
            "no cycle keeps the engine (and its ticker) alive"
        );
    }
}
