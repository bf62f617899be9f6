//! The process's memory limit (its cgroup's, v2 or v1) and the check that the guest memory
//! budget plus the host's own reserve fit under it.
//!
//! The guests' share is bounded by the runtime (`guest::Config::memory_budget`: instances at
//! once times the per-instance cap); the rest of the process (caches of the watched objects,
//! compiled guests, buffers) is bounded by nothing but is stated as a reserve, measured with
//! `make bench-scale` (58.8 MiB peak with 1000 AppServices, 82.0 MiB with three guests
//! resident). Start-up refuses a budget that could get the process OOM-killed.

use std::path::Path;

/// Default reserve for everything but the guests' instances, in MiB.
pub const DEFAULT_RESERVE_MIB: usize = 128;

/// cgroup v1 reports "no limit" as a page-rounded `i64::MAX`; anything this large is none.
const UNLIMITED: u64 = 1 << 62;

/// Why the memory settings cannot hold.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Budget plus reserve exceed the process's memory limit.
    #[error(
        "the guest memory budget ({budget_mib} MiB) plus the host's reserve ({reserve_mib} MiB) \
         exceed the memory limit of {limit_mib} MiB ({source_of_limit}); lower \
         --guest-memory-budget-mib (at least one instance of --guest-memory-mib) or raise the \
         limit"
    )]
    OverLimit {
        /// `guest::Config::memory_budget`, in MiB.
        budget_mib: u64,
        /// The host's reserve, in MiB.
        reserve_mib: u64,
        /// The limit, in MiB.
        limit_mib: u64,
        /// Where the limit came from: a flag or a cgroup file.
        source_of_limit: String,
    },
}

/// A memory limit and where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Bytes.
    pub bytes: u64,
    /// e.g. `/sys/fs/cgroup/memory.max` or `--memory-limit-mib`.
    pub source: String,
}

/// The tightest memory limit of this process's cgroup and its ancestors, v2 first, then v1;
/// `None` when there is none (or no cgroup file system).
pub fn cgroup_limit() -> Option<Limit> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroup_limit_at(Path::new("/sys/fs/cgroup"), &membership)
}

/// [`cgroup_limit`] with the cgroup file system at `root` and `/proc/self/cgroup` reading
/// `membership`.
pub fn cgroup_limit_at(root: &Path, membership: &str) -> Option<Limit> {
    let mut v2 = None;
    let mut v1 = None;
    for line in membership.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            v2 = Some(path);
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path);
        }
    }
    let v2 = v2.and_then(|path| tightest(root, path, "memory.max"));
    v2.or_else(|| v1.and_then(|path| tightest(&root.join("memory"), path, "memory.limit_in_bytes")))
}

/// The smallest limit in `file` from `mount/path` up to `mount`. NB: inside a container without
/// its own cgroup namespace, `path` names a host cgroup that is not under `mount`, whose root
/// is then the container's cgroup; the walk reaches it.
fn tightest(mount: &Path, path: &str, file: &str) -> Option<Limit> {
    let relative = Path::new(path.trim_start_matches('/'));
    relative
        .ancestors()
        .filter_map(|dir| {
            let at = mount.join(dir).join(file);
            let bytes = parse(&std::fs::read_to_string(&at).ok()?)?;
            Some(Limit {
                bytes,
                source: at.display().to_string(),
            })
        })
        .min_by_key(|limit| limit.bytes)
}

/// A `memory.max` or `memory.limit_in_bytes` value; `None` for `max` or an unlimited v1 value.
fn parse(text: &str) -> Option<u64> {
    text.trim().parse().ok().filter(|&bytes| bytes < UNLIMITED)
}

/// Checks that `budget` (bytes of the guests' instances) plus `reserve` (bytes of the rest)
/// fit in `limit`; no limit means nothing to check.
pub fn check(budget: usize, reserve: usize, limit: Option<&Limit>) -> Result<(), Error> {
    let Some(limit) = limit else {
        return Ok(());
    };
    let need = u64::try_from(budget.saturating_add(reserve)).unwrap_or(u64::MAX);
    if need <= limit.bytes {
        return Ok(());
    }
    let mib = |bytes: u64| bytes >> 20;
    Err(Error::OverLimit {
        budget_mib: mib(budget as u64),
        reserve_mib: mib(reserve as u64),
        limit_mib: mib(limit.bytes),
        source_of_limit: limit.source.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("app-operator-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn v2_takes_the_tightest_ancestor() {
        let root = temp("cgroup-v2");
        write(&root.join("memory.max"), "max\n");
        write(&root.join("kubepods/memory.max"), "1073741824\n");
        write(&root.join("kubepods/pod1/memory.max"), "536870912\n");
        write(&root.join("kubepods/pod1/c1/memory.max"), "max\n");
        let limit = cgroup_limit_at(&root, "0::/kubepods/pod1/c1\n").expect("a limit");
        assert_eq!(limit.bytes, 512 << 20);
        assert!(
            limit.source.ends_with("kubepods/pod1/memory.max"),
            "{limit:?}"
        );
        assert_eq!(cgroup_limit_at(&root, "0::/\n"), None, "max is no limit");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn v1_is_the_fallback_and_its_unlimited_value_is_none() {
        let root = temp("cgroup-v1");
        write(
            &root.join("memory/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        let membership = "4:memory:/process_api/abc\n3:cpu,cpuacct:/\n0::/\n";
        assert_eq!(cgroup_limit_at(&root, membership), None);
        // A container without a cgroup namespace: the path is not under the mount.
        write(&root.join("memory/memory.limit_in_bytes"), "268435456\n");
        let limit = cgroup_limit_at(&root, membership).expect("the mount root's limit");
        assert_eq!(limit.bytes, 256 << 20);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn check_refuses_a_budget_over_the_limit() {
        let limit = Limit {
            bytes: 512 << 20,
            source: "test".into(),
        };
        check(384 << 20, 128 << 20, Some(&limit)).expect("exactly the limit fits");
        let err = check(1024 << 20, 128 << 20, Some(&limit)).expect_err("over");
        assert_eq!(
            err.to_string(),
            "the guest memory budget (1024 MiB) plus the host's reserve (128 MiB) exceed the \
             memory limit of 512 MiB (test); lower --guest-memory-budget-mib (at least one \
             instance of --guest-memory-mib) or raise the limit"
        );
        check(usize::MAX, usize::MAX, None).expect("no limit, nothing to check");
    }
}
