//! `waggle bench fill`: the large-state benchmark's fill (issue 30). Creates instances of
//! `workloads/parked.bpmn` as fast as the server takes them until the partitions' RocksDB state
//! in the server's data folder reaches a size; each instance then waits for good on three
//! branches: a message catch event (a correlation key of its own, never published), a timer a
//! day away and a job of a type no worker takes. W2 and W5 run on top afterwards
//! (`scripts/bigstate-bench.sh`).
//!
//! Each instance carries a variable of `--payload-bytes` pseudo-random hex characters (LZ4, the
//! state's compression, cannot shrink it much), so that gigabytes of state take minutes: 4 KB
//! makes about 200,000 instances per GB.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use tokio::task::JoinSet;
use waggle_protocol::gateway::CreateProcessInstanceRequest;

use crate::calls;
use crate::client;

/// The fill's model: a message catch event, a timer a day away and an un-worked job, in parallel.
pub const PARKED: &str = include_str!("../../../workloads/parked.bpmn");
/// Its process id.
pub const PARKED_PROCESS: &str = "benchmark-parked";

/// Samples of the state's size, one a second, whose smallest is taken as its size.
const SETTLE_SAMPLES: usize = 20;

#[derive(Debug, Args)]
pub struct FillArgs {
    /// Gateway address of the server (loopback only).
    #[arg(long, default_value = "127.0.0.1:26500")]
    pub target: String,
    /// The server's data folder: the fill stops once the RocksDB state of its partitions
    /// (`partitions/*/runtime`) holds --state-gb.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Size of the state to reach, in GB (10^9 bytes).
    #[arg(long)]
    pub state_gb: f64,
    /// Characters of the `blob` variable each instance carries.
    #[arg(long, default_value_t = 4096)]
    pub payload_bytes: usize,
    /// Creations in flight at once.
    #[arg(long, default_value_t = 64)]
    pub in_flight: usize,
}

/// What a fill did.
#[derive(Debug, Clone, Copy)]
pub struct FillReport {
    pub instances: u64,
    pub state_bytes: u64,
    pub elapsed: Duration,
    pub rejected: u64,
}

/// Bytes of the files under `dir` (recursively); 0 if it does not exist.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// Bytes of the RocksDB state of every partition in the data folder `data_dir`.
pub fn state_bytes(data_dir: &Path) -> u64 {
    let Ok(partitions) = std::fs::read_dir(data_dir.join("partitions")) else { return 0 };
    partitions.flatten().map(|p| dir_bytes(&p.path().join("runtime"))).sum()
}

/// `n` pseudo-random hex characters, different for every `seed` (xorshift64*).
pub fn blob(seed: u64, n: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::with_capacity(n);
    while out.len() < n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        for nibble in 0..16 {
            if out.len() == n {
                break;
            }
            out.push(char::from_digit(((r >> (nibble * 4)) & 0xf) as u32, 16).expect("a nibble"));
        }
    }
    out
}

/// Deploys the parked model and creates instances of it until the state holds `args.state_gb`
/// (in each of the last 20 one-second samples of its folders' size).
pub async fn run(args: &FillArgs) -> anyhow::Result<FillReport> {
    client::check_loopback(&args.target)?;
    anyhow::ensure!(args.in_flight > 0, "--in-flight must be at least 1");
    let target_bytes = (args.state_gb * 1e9) as u64;
    let mut admin = client::connect(&args.target).await?;
    client::deploy(&mut admin, "parked.bpmn", PARKED).await?;
    let calls = calls::connect(&args.target).await?;
    let run_id = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let (next, created, rejected) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..args.in_flight {
        let (calls, next, created, rejected, stop) = (calls.clone(), next.clone(), created.clone(), rejected.clone(), stop.clone());
        let payload_bytes = args.payload_bytes;
        tasks.spawn(async move {
            let mut failures = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let seq = next.fetch_add(1, Ordering::Relaxed);
                let variables = serde_json::json!({
                    "correlationKey": format!("parked-{run_id}-{seq}"),
                    "blob": blob(seq ^ run_id.rotate_left(32), payload_bytes),
                });
                let request = CreateProcessInstanceRequest {
                    bpmn_process_id: PARKED_PROCESS.into(),
                    version: -1,
                    variables: variables.to_string(),
                    ..Default::default()
                };
                match calls.create_process_instance(&request).await {
                    Ok(_) => {
                        created.fetch_add(1, Ordering::Relaxed);
                        failures = 0;
                    }
                    Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                        rejected.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(s) => {
                        failures += 1;
                        if failures > 100 {
                            return Err(anyhow::anyhow!("creating parked instances: {:?}: {}", s.code(), s.message()));
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            Ok(())
        });
    }
    let mut last = (Instant::now(), 0u64);
    let mut ticks = 0u64;
    let mut recent = std::collections::VecDeque::new();
    let state = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some(done) = tasks.try_join_next() {
            stop.store(true, Ordering::Relaxed);
            done.context("a creator panicked")??;
        }
        // a compaction's output files sit beside its inputs until it ends (the folder holds up
        // to twice the data for seconds): the state is the smallest size of the last window
        recent.push_back(state_bytes(&args.data_dir));
        if recent.len() > SETTLE_SAMPLES {
            recent.pop_front();
        }
        let state = if recent.len() == SETTLE_SAMPLES { recent.iter().copied().min().unwrap_or(0) } else { 0 };
        ticks += 1;
        if ticks.is_multiple_of(10) || state >= target_bytes {
            let (now, n) = (Instant::now(), created.load(Ordering::Relaxed));
            let rate = (n - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
            last = (now, n);
            eprintln!(
                "fill: {:>5.0} s  {n} instances  {rate:.0} PI/s  state {:.2} GB (folder now {:.2})  rejected {}  load {}",
                started.elapsed().as_secs_f64(),
                state as f64 / 1e9,
                recent.back().copied().unwrap_or(0) as f64 / 1e9,
                rejected.load(Ordering::Relaxed),
                load_average()
            );
        }
        if state >= target_bytes {
            break state;
        }
    };
    stop.store(true, Ordering::Relaxed);
    while let Some(done) = tasks.join_next().await {
        done.context("a creator panicked")??;
    }
    Ok(FillReport {
        instances: created.load(Ordering::Relaxed),
        state_bytes: state,
        elapsed: started.elapsed(),
        rejected: rejected.load(Ordering::Relaxed),
    })
}

/// The machine's 1, 5 and 15 minute load averages, as /proc/loadavg has them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_hex_of_the_asked_length_and_differ_by_seed() {
        let (a, b) = (blob(1, 100), blob(2, 100));
        assert_eq!((a.len(), b.len()), (100, 100));
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(blob(1, 100), a, "the same seed gives the same blob");
        assert!(blob(7, 0).is_empty());
    }

    #[test]
    fn state_bytes_sums_the_partitions_runtime_folders() {
        let dir = tempfile::tempdir().unwrap();
        for (p, n) in [("1", 10usize), ("2", 5)] {
            let runtime = dir.path().join("partitions").join(p).join("runtime");
            std::fs::create_dir_all(runtime.join("sub")).unwrap();
            std::fs::write(runtime.join("a.sst"), vec![0u8; n]).unwrap();
            std::fs::write(runtime.join("sub").join("b"), vec![0u8; 1]).unwrap();
            std::fs::write(dir.path().join("partitions").join(p).join("outside"), vec![0u8; 100]).unwrap();
        }
        assert_eq!(state_bytes(dir.path()), 17);
        assert_eq!(state_bytes(&dir.path().join("missing")), 0);
    }
}
