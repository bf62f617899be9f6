//! The operator as a user runs it: the `app-operator` binary in a child process, with its own
//! flags, kubeconfig, log file and probe and metrics ports.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::wait;

/// The `app-operator` binary next to the running test (`<target>/<profile>/app-operator`).
///
/// `cargo test --workspace` (what `make test` runs) builds it, since the host crate has
/// integration tests. Fails, saying how to build it, when it is missing or older than a source
/// it is built from, so a test never runs a stale operator.
pub fn binary() -> anyhow::Result<PathBuf> {
    // NB: the test executable is <target>/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe().context("failed to locate the test executable")?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the test executable is not in <target>/<profile>/deps")?;
    let binary = profile_dir.join("app-operator");
    let release = if profile_dir.ends_with("release") {
        " --release"
    } else {
        ""
    };
    let hint = format!("build it with `cargo build{release} -p app-operator` (or run `make test`)");
    let built = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .with_context(|| format!("no operator binary at {}; {hint}", binary.display()))?;
    for input in inputs(&binary) {
        if let Some(newer) = newer_than(&input, built)? {
            bail!(
                "{} is older than {}; {hint}",
                binary.display(),
                newer.display()
            );
        }
    }
    Ok(binary)
}

/// What `binary` was built from: the paths of cargo's dep-info beside it (`<binary>.d`), which
/// lists only what the build read, so a file that only the unit tests compile does not count;
/// without one, every source of the host, the guest and the contract.
fn inputs(binary: &Path) -> Vec<PathBuf> {
    match std::fs::read_to_string(binary.with_extension("d")) {
        Ok(dep_info) => dep_info_paths(&dep_info),
        Err(_) => {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            ["host/src", "host/build.rs", "guest/src", "wit"]
                .iter()
                .map(|dir| root.join(dir))
                .collect()
        }
    }
}

/// The paths a make-style dep-info rule (`target: dep dep...`, spaces escaped as `\ `) lists.
fn dep_info_paths(dep_info: &str) -> Vec<PathBuf> {
    const SPACE: char = '\u{0}';
    let Some((_, deps)) = dep_info.split_once(": ") else {
        return Vec::new();
    };
    deps.replace("\\ ", &SPACE.to_string())
        .split_whitespace()
        .map(|path| PathBuf::from(path.replace(SPACE, " ").trim_end_matches('/')))
        .collect()
}

/// The first file under `path` modified after `time` (or `path` itself, when it is gone), if
/// any.
fn newer_than(path: &Path, time: std::time::SystemTime) -> anyhow::Result<Option<PathBuf>> {
    let meta = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(path.to_owned())),
        meta => meta.with_context(|| format!("failed to stat {}", path.display()))?,
    };
    if meta.is_file() {
        return Ok((meta.modified()? > time).then(|| path.to_owned()));
    }
    for entry in std::fs::read_dir(path)? {
        if let Some(newer) = newer_than(&entry?.path(), time)? {
            return Ok(Some(newer));
        }
    }
    Ok(None)
}

/// A free TCP port on 127.0.0.1 (free when this returns; good enough for tests).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("failed to find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// A running `app-operator run`. Dropping it kills the process.
pub struct OperatorProcess {
    child: Child,
    /// Address of `/healthz` and `/readyz`.
    pub probe_addr: SocketAddr,
    /// Address of `/metrics`.
    pub metrics_addr: SocketAddr,
    /// The process's stdout and stderr.
    pub log: PathBuf,
}

impl OperatorProcess {
    /// Starts `app-operator run <args>` with `kubeconfig`, free probe and metrics ports, and its
    /// output in `<log_dir>/<name>.log`. `RUST_LOG` is passed through.
    pub fn start(
        name: &str,
        kubeconfig: &Path,
        args: &[&str],
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        Self::start_with_env(name, kubeconfig, args, log_dir, &[])
    }

    /// [`OperatorProcess::start`] with the variables `env` set as well (e.g. `RUST_LOG`).
    pub fn start_with_env(
        name: &str,
        kubeconfig: &Path,
        args: &[&str],
        log_dir: &Path,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let binary = binary()?;
        let probe_addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let metrics_addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        std::fs::create_dir_all(log_dir)?;
        let mut command = Command::new(&binary);
        command
            .arg("run")
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--probe-addr")
            .arg(probe_addr.to_string())
            .arg("--metrics-addr")
            .arg(metrics_addr.to_string())
            // NB: the operator must not pick up the tests' own variables (e.g. POD_NAME).
            .env_remove("POD_NAME")
            .env_remove("KUBECONFIG")
            .envs(env.iter().copied());
        Self::spawn(
            command,
            probe_addr,
            metrics_addr,
            log_dir.join(format!("{name}.log")),
        )
    }

    /// Starts `command`, an operator serving `/readyz` on `probe_addr` and `/metrics` on
    /// `metrics_addr` (the Go seed peer as much as app-operator), its stdout and stderr to `log`.
    pub fn spawn(
        mut command: Command,
        probe_addr: SocketAddr,
        metrics_addr: SocketAddr,
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        let out = std::fs::File::create(&log)
            .with_context(|| format!("failed to create {}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("failed to start {}", command.get_program().display()))?;
        Ok(Self {
            child,
            probe_addr,
            metrics_addr,
            log,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// GETs `path` from the probe endpoint: `(status code, body)`, or `None` when it does not
    /// answer (yet).
    pub fn probe(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.probe_addr, path)
    }

    /// The value of the metric sample `name` (e.g. `app_operator_reconciles_total`), if exposed.
    pub fn metric(&self, name: &str) -> Option<f64> {
        crate::prom::samples(&self.metrics()?, name)
            .find_map(|(labels, value)| labels.is_empty().then_some(value))
    }

    /// The sum of every sample of the metric family `name` (e.g.
    /// `app_operator_kube_requests_total`, over all its labels), if exposed.
    pub fn metric_sum(&self, name: &str) -> Option<f64> {
        self.metric_sum_matching(name, "")
    }

    /// The sum of the samples of the metric family `name` whose labels contain `label` (e.g.
    /// `method="GET"`), if any is exposed.
    pub fn metric_sum_matching(&self, name: &str, label: &str) -> Option<f64> {
        crate::prom::sum_matching(&self.metrics()?, name, label)
    }

    /// The operator's `/metrics` now (one scrape, for figures that must agree with each other),
    /// if it answers.
    pub fn metrics(&self) -> Option<String> {
        http_get(self.metrics_addr, "/metrics").map(|(_, body)| body)
    }

    /// Field `field` of the process's `/proc/<pid>/status` in KiB: `VmHWM` (peak RSS) or
    /// `VmRSS`. Only while the process runs (or has not been waited for).
    pub fn status_kib(&self, field: &str) -> anyhow::Result<u64> {
        status_kib(self.pid(), field)
    }

    /// Waits until `/readyz` answers 200 with a verdict (the body's first line; notes follow) ending in `state` (`ready` or `standby`).
    pub async fn wait_readyz(&mut self, state: &str) -> anyhow::Result<()> {
        let what = format!("operator /readyz to say {state}");
        self.wait_probe(&what, Duration::from_secs(60), |body| {
            body.lines().next().is_some_and(|v| v.ends_with(state))
        })
        .await
    }

    /// Waits up to `timeout` until `/readyz` answers 200, whatever it says.
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.wait_probe("operator /readyz to answer 200", timeout, |_| true)
            .await
    }

    /// Waits up to `timeout` until `/readyz` answers 200 with a body `accept` takes; fails with
    /// the log's last lines if the process exits first.
    async fn wait_probe(
        &mut self,
        what: &str,
        timeout: Duration,
        accept: impl Fn(&str) -> bool,
    ) -> anyhow::Result<()> {
        let what = format!("{what} (log: {})", self.log.display());
        let probe_addr = self.probe_addr;
        wait::until(&what, timeout, || {
            let alive = self.check_alive();
            let probed = http_get(probe_addr, "/readyz")
                .filter(|(code, body)| *code == 200 && accept(body))
                .map(|_| ());
            async move { alive.map(|()| probed) }
        })
        .await
    }

    /// Fails, with the log's last lines, if the process has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "the operator exited ({status}); its log ({}) ends:\n{}",
                self.log.display(),
                self.log_tail(5)
            );
        }
        Ok(())
    }

    /// Peak resident set size (`VmHWM`) so far, in KiB.
    pub fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        self.status_kib("VmHWM")
    }

    /// CPU time the process has used so far, user plus system, all threads, in seconds.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        cpu_seconds(self.pid())
    }

    /// The last `lines` lines of the log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<_> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills the process at once (SIGKILL), as a crash would: nothing is released.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().context("failed to kill the operator")?;
        self.child.wait()?;
        Ok(())
    }

    /// Sends `signal` (e.g. `STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()?;
        anyhow::ensure!(status.success(), "kill -{signal} {pid} failed");
        Ok(())
    }

    /// Waits up to `timeout` for the process to exit on its own; returns its status.
    pub async fn wait_exit(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<std::process::ExitStatus> {
        wait::until("the operator to exit", timeout, || {
            let exited = self.child.try_wait();
            async move { Ok(exited?) }
        })
        .await
    }

    /// Lines of the log that contain `text`.
    pub fn log_count(&self, text: &str) -> usize {
        self.log_lines(text).len()
    }

    /// The lines of the log that contain `text`, in order.
    pub fn log_lines(&self, text: &str) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .filter(|l| l.contains(text))
            .map(str::to_owned)
            .collect()
    }

    /// Sends SIGTERM and waits up to 30 s for the process to exit; returns whether it exited 0.
    pub async fn terminate(&mut self) -> anyhow::Result<bool> {
        Ok(self.terminate_timed().await?.0.success())
    }

    /// Sends SIGTERM and waits up to 30 s for the process to exit; returns its status and how
    /// long it took. A process still running then is killed when this is dropped.
    pub async fn terminate_timed(
        &mut self,
    ) -> anyhow::Result<(std::process::ExitStatus, Duration)> {
        let started = std::time::Instant::now();
        self.signal("TERM")?;
        let status = self.wait_exit(Duration::from_secs(30)).await?;
        Ok((status, started.elapsed()))
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Field `field` (`VmHWM`, `VmRSS`, ...) of `/proc/<pid>/status`, in KiB.
pub fn status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

/// How many TCP connections process `pid` has established to `port` (of any address): its
/// sockets (`/proc/<pid>/fd`) found in the network namespace's tables (`/proc/net/tcp{,6}`).
pub fn connections_to(pid: u32, port: u16) -> anyhow::Result<usize> {
    let mut inodes = HashSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        // NB: a descriptor closed since the listing is no longer of interest.
        let Ok(target) = std::fs::read_link(fd?.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
        {
            inodes.insert(inode.to_owned());
        }
    }
    let mut count = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        // NB: a kernel without IPv6 has no tcp6 table.
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        count += text
            .lines()
            .skip(1)
            .filter(|line| established_to(line, port, &inodes))
            .count();
    }
    Ok(count)
}

/// Whether a line of `/proc/net/tcp` is an established connection to `port` of one of `inodes`.
fn established_to(line: &str, port: u16, inodes: &HashSet<String>) -> bool {
    // NB: sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    let fields: Vec<&str> = line.split_whitespace().collect();
    let remote_port = fields
        .get(2)
        .and_then(|remote| remote.rsplit(':').next())
        .and_then(|hex| u16::from_str_radix(hex, 16).ok());
    fields.len() > 9 && remote_port == Some(port) && fields[3] == "01" && inodes.contains(fields[9])
}

/// CPU time process `pid` has used so far, user plus system, all threads, in seconds, with
/// that of the child processes it has waited for (app-operator's guest compiles).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let ticks = ticks_of(pid)?;
    Ok((ticks.own + ticks.children) as f64 / clock_ticks()?)
}

/// Of [`cpu_seconds`], the part of the child processes `pid` has waited for: 0 when it ran none
/// (app-operator runs one per guest it compiles, unless told to compile in its own process).
pub fn children_cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    Ok(ticks_of(pid)?.children as f64 / clock_ticks()?)
}

/// Process `pid`'s CPU ticks, read from `/proc/<pid>/stat`.
fn ticks_of(pid: u32) -> anyhow::Result<CpuTicks> {
    cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat"))?)
}

/// A process's CPU time in clock ticks, user plus system.
#[derive(Debug, PartialEq)]
struct CpuTicks {
    /// Its own threads' (utime + stime).
    own: u64,
    /// Its waited children's (cutime + cstime).
    children: u64,
}

/// The process's CPU ticks from the text of `/proc/<pid>/stat`.
fn cpu_ticks(stat: &str) -> anyhow::Result<CpuTicks> {
    // NB: field 2, the command name, is in parentheses and may hold spaces; the fields after
    // it start with field 3 (state), so utime, stime, cutime and cstime (fields 14 to 17) are
    // the 12th to 15th after the last ')'. The children's times count only once the child has
    // exited and been waited for, which is when a guest compile child has done its work.
    let rest = stat
        .rsplit_once(')')
        .context("no ')' in /proc/<pid>/stat")?
        .1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .context("/proc/<pid>/stat too short")?
            .parse()?)
    };
    Ok(CpuTicks {
        own: field(11)? + field(12)?,
        children: field(13)? + field(14)?,
    })
}

/// Clock ticks per second (`getconf CLK_TCK`), the unit of `/proc/<pid>/stat`'s times.
fn clock_ticks() -> anyhow::Result<f64> {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    if let Some(ticks) = TICKS.get() {
        return Ok(*ticks);
    }
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .context("failed to run getconf CLK_TCK")?;
    let ticks: f64 = String::from_utf8(out.stdout)?.trim().parse()?;
    Ok(*TICKS.get_or_init(|| ticks))
}

/// A plain HTTP/1.1 GET on a loopback address: `(status code, body)`, or `None` when nothing
/// answers.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.get(9..12)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.trim().to_owned();
    Some((code, body))
}

/// The `run` arguments of one of several replicas with leader election: AppServices in
/// `apps_namespace`, the Lease in `lease_namespace` lasting `lease_secs` with a renew grace of
/// 2 s, and `identity`. Tests add their own flags after these.
pub fn replica_args(
    apps_namespace: &str,
    lease_namespace: &str,
    identity: &str,
    lease_secs: u64,
) -> Vec<String> {
    [
        "--namespace",
        apps_namespace,
        "--leader-elect",
        "--leader-elect-namespace",
        lease_namespace,
        "--leader-elect-identity",
        identity,
        "--leader-elect-lease-secs",
        &lease_secs.to_string(),
        "--leader-elect-renew-grace-secs",
        "2",
    ]
    .map(str::to_owned)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_table_line_counts_when_established_to_the_port_from_a_socket_of_ours() {
        // NB: 127.0.0.1:40000 -> 127.0.0.1:16443, established, inode 4242.
        let line = "   3: 0100007F:9C40 0100007F:403B 01 00000000:00000000 00:00000000 00000000 \
                    0        0 4242 1 0000000000000000 20 4 30 10 -1";
        let ours = HashSet::from(["4242".to_owned()]);
        assert!(established_to(line, 16443, &ours));
        assert!(!established_to(line, 16444, &ours));
        assert!(!established_to(line, 16443, &Default::default()));
        let listening = line.replace(" 01 ", " 0A ");
        assert!(!established_to(&listening, 16443, &ours));
    }

    #[test]
    fn cpu_ticks_are_the_process_and_its_waited_children_after_the_command_name() {
        let stat = "4242 (tokio (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 153 47 20 5 20 0 9 0";
        let ticks = cpu_ticks(stat).unwrap();
        assert_eq!(
            ticks,
            CpuTicks {
                own: 200,
                children: 25
            }
        );
    }

    #[test]
    fn dep_info_paths_are_the_rule_s_dependencies() {
        let dep_info = "/t/release/app-operator: /w/host/src/lib.rs /w/a\\ b.rs /w/guest/ \n";
        assert_eq!(
            dep_info_paths(dep_info),
            ["/w/host/src/lib.rs", "/w/a b.rs", "/w/guest"].map(PathBuf::from)
        );
        assert!(dep_info_paths("").is_empty());
    }

    #[test]
    fn a_gone_input_counts_as_newer() -> anyhow::Result<()> {
        let gone = Path::new("/nonexistent/app-operator-input.rs");
        assert_eq!(
            newer_than(gone, std::time::SystemTime::now())?,
            Some(gone.to_owned())
        );
        Ok(())
    }

    #[test]
    fn this_process_has_a_cpu_time() -> anyhow::Result<()> {
        assert!(cpu_seconds(std::process::id())? >= 0.0);
        assert!(clock_ticks()? > 0.0);
        Ok(())
    }
}
