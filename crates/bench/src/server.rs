//! The server under test: start Waggle fresh, or attach to a running one; wait until ready; read
//! its CPU time and memory from /proc; stop it.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use tokio::process::{Child, Command};

use crate::client;

const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// CPU time and memory of a process at one moment, from /proc.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProcSample {
    /// User plus system CPU time since the process started, in seconds.
    pub cpu_s: f64,
    /// Resident set size now, in bytes.
    pub rss_bytes: u64,
    /// Peak resident set size since the process started (VmHWM), in bytes.
    pub peak_rss_bytes: u64,
}

/// Reads /proc/PID/stat and /proc/PID/status.
pub fn sample(pid: u32) -> anyhow::Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("reading /proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("reading /proc/{pid}/status"))?;
    parse_proc(&stat, &status, clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Parses utime and stime (fields 14 and 15 of stat) and VmRSS and VmHWM (status).
pub fn parse_proc(stat: &str, status: &str, ticks_per_s: f64) -> anyhow::Result<ProcSample> {
    // the command name (field 2) may hold spaces and parentheses: fields after it follow the last ')'
    let after = stat.rsplit_once(')').context("malformed /proc stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11).context("stat has no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("stat has no stime")?.parse()?;
    let kb = |key: &str| -> anyhow::Result<u64> {
        let line = status.lines().find(|l| l.starts_with(key)).with_context(|| format!("status has no {key}"))?;
        Ok(line[key.len()..].trim().trim_end_matches("kB").trim().parse::<u64>()? * 1024)
    };
    Ok(ProcSample { cpu_s: (utime + stime) as f64 / ticks_per_s, rss_bytes: kb("VmRSS:")?, peak_rss_bytes: kb("VmHWM:")? })
}

/// The machine's 1-minute load average (/proc/loadavg).
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// A running server the bench started or attached to.
pub struct Server {
    pub address: String,
    pub pid: Option<u32>,
    /// Spawn → every partition has a healthy leader; only for servers the bench started.
    pub startup: Option<Duration>,
    child: Option<Child>,
    temp_dir: Option<tempfile::TempDir>,
}

/// A loopback port free now, below Linux's ephemeral range (32768-60999). A port the kernel
/// hands out for `bind(0)` is in that range, so any outgoing connection could take it as its
/// local port between this check and the server's own bind; these cannot be taken that way.
pub fn free_port() -> anyhow::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const PORTS: u32 = 12_000;
    // processes run side by side (benches, test binaries) start at their own place in the range
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(u32::MAX, std::process::id() % PORTS, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..PORTS {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::SeqCst) % PORTS) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    anyhow::bail!("no free loopback port in {FIRST}-{}", FIRST + PORTS - 1)
}

impl Server {
    /// A server someone else started.
    pub fn attach(address: &str, pid: Option<u32>) -> Self {
        Server { address: address.into(), pid, startup: None, child: None, temp_dir: None }
    }

    /// Starts `waggle` on free loopback ports with a fresh data directory and waits until ready.
    pub async fn start_waggle(bin: &Path) -> anyhow::Result<Self> {
        let data = tempfile::Builder::new().prefix("waggle-bench-").tempdir()?;
        let (port, mgmt) = (free_port()?, free_port()?);
        let address = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(data.path().join("waggle.log"))?;
        let spawned = Instant::now();
        let mut child = Command::new(bin)
            .arg("--data-dir")
            .arg(data.path().join("data"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--management-port", &mgmt.to_string()])
            .args(["--rest-port", &free_port()?.to_string()])
            .env("WAGGLE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id();
        let ready = tokio::select! {
            r = client::wait_ready(&address, READY_TIMEOUT) => r?,
            status = child.wait() => bail!("{} exited before it was ready: {}", bin.display(), status?),
        };
        Ok(Server { address, pid, startup: Some(ready - spawned), child: Some(child), temp_dir: Some(data) })
    }

    pub fn sample(&self) -> Option<ProcSample> {
        self.pid.and_then(|p| sample(p).ok())
    }

    /// The data folder of a server the bench started (`None` when attached).
    pub fn data_dir(&self) -> Option<std::path::PathBuf> {
        self.temp_dir.as_ref().map(|d| d.path().join("data"))
    }

    /// Stops a server the bench started (SIGTERM, then SIGKILL after 30 s); leaves attached ones.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                // SAFETY: the pid is our own child's, which we have not reaped yet.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
            if tokio::time::timeout(Duration::from_secs(30), child.wait()).await.is_err() {
                child.kill().await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_and_status() {
        let stat = "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 123 0 0 0 250 50 0 0 20 0 40 0 100 0 0";
        let status = "Name:\tjava\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t40\n";
        let s = parse_proc(stat, status, 100.0).unwrap();
        assert_eq!(s, ProcSample { cpu_s: 3.0, rss_bytes: 100 << 20, peak_rss_bytes: 200 << 20 });
    }

    #[test]
    fn samples_this_process() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss_bytes > 0 && s.peak_rss_bytes >= s.rss_bytes);
    }
}
