//! A cluster of `waggle broker` processes on loopback that the bench starts itself: each broker
//! a child process of the given binary with its own free ports and a data folder in one
//! temporary folder; killed (`kill -9`), stopped (SIGTERM) and restarted on the same data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::process::{Child, Command};

use crate::management::{self, Replica};
use crate::server::{self, free_port};

/// The shape of a cluster.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub brokers: usize,
    pub partitions: u16,
    pub replication_factor: usize,
}

/// One broker of the cluster.
pub struct Broker {
    pub node_id: usize,
    /// Its embedded gateway's gRPC address.
    pub gateway: String,
    pub management_port: u16,
    args: Vec<String>,
    dir: PathBuf,
    child: Option<Child>,
}

impl Broker {
    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Its log (stderr of every start).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("waggle.log")
    }
}

/// The brokers; dropping it kills the ones still running.
pub struct Cluster {
    pub shape: Shape,
    pub brokers: Vec<Broker>,
    bin: PathBuf,
    _temp: tempfile::TempDir,
}

/// Longest wait for a started cluster to have a leader for every partition.
const START_TIMEOUT: Duration = Duration::from_secs(180);

impl Cluster {
    /// Starts `shape.brokers` brokers of `bin` and waits until every partition has a leader.
    pub async fn start(bin: &Path, shape: Shape) -> anyhow::Result<Cluster> {
        let temp = tempfile::Builder::new().prefix("waggle-bench-cluster-").tempdir()?;
        let internal: Vec<u16> = (0..shape.brokers).map(|_| free_port()).collect::<anyhow::Result<_>>()?;
        let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
        let mut brokers = vec![];
        for (node_id, internal_port) in internal.iter().enumerate() {
            let (port, management_port) = (free_port()?, free_port()?);
            let dir = temp.path().join(format!("broker-{node_id}"));
            std::fs::create_dir_all(&dir)?;
            let args: Vec<String> = vec![
                "broker".into(),
                "--node-id".into(),
                node_id.to_string(),
                "--cluster-size".into(),
                shape.brokers.to_string(),
                "--partitions".into(),
                shape.partitions.to_string(),
                "--replication-factor".into(),
                shape.replication_factor.to_string(),
                "--contact-points".into(),
                contact_points.clone(),
                "--internal-port".into(),
                internal_port.to_string(),
                "--host".into(),
                "127.0.0.1".into(),
                "--port".into(),
                port.to_string(),
                "--management-port".into(),
                management_port.to_string(),
                "--rest-port".into(),
                free_port()?.to_string(),
                "--data-dir".into(),
                dir.join("data").display().to_string(),
            ];
            brokers.push(Broker { node_id, gateway: format!("127.0.0.1:{port}"), management_port, args, dir, child: None });
        }
        let mut cluster = Cluster { shape, brokers, bin: bin.to_path_buf(), _temp: temp };
        for i in 0..shape.brokers {
            cluster.spawn(i)?;
        }
        cluster.wait_leaders(START_TIMEOUT, None).await?;
        Ok(cluster)
    }

    /// Starts broker `i` (again, on its data).
    pub fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let b = &mut self.brokers[i];
        anyhow::ensure!(b.child.is_none(), "broker {i} is running");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(b.log_path())?;
        let child = Command::new(&self.bin)
            .args(&b.args)
            .env("WAGGLE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        b.child = Some(child);
        Ok(())
    }

    /// `kill -9` of broker `i`: no shutdown code runs.
    pub async fn kill9(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(mut child) = self.brokers[i].child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Stops broker `i` with SIGTERM, SIGKILL after 30 s.
    pub async fn terminate(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(mut child) = self.brokers[i].child.take() {
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

    /// Stops every broker (SIGTERM).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        for i in 0..self.brokers.len() {
            self.terminate(i).await?;
        }
        Ok(())
    }

    /// Process ids of the running brokers.
    pub fn pids(&self) -> Vec<u32> {
        self.brokers.iter().filter_map(Broker::pid).collect()
    }

    /// Every running broker's replicas (a broker that does not answer is left out).
    pub async fn replicas(&self) -> BTreeMap<usize, Vec<Replica>> {
        let mut all = BTreeMap::new();
        for b in self.brokers.iter().filter(|b| b.is_running()) {
            if let Ok(r) = management::partitions(b.management_port).await {
                all.insert(b.node_id, r);
            }
        }
        all
    }

    /// The broker serving as leader of each partition (1-based ids, in order), if every
    /// partition has one among the running brokers other than `except`.
    pub async fn leaders(&self, except: Option<usize>) -> Option<Vec<usize>> {
        let replicas = self.replicas().await;
        leaders_of(&replicas, self.shape.partitions, except)
    }

    /// The broker serving as leader of `partition` among the running brokers other than `except`.
    pub async fn leader_of(&self, partition: u16, except: Option<usize>) -> Option<usize> {
        leader_in(&self.replicas().await, partition, except)
    }

    /// Waits until every partition has a leader among the running brokers other than `except`;
    /// returns them (see [`Cluster::leaders`]).
    pub async fn wait_leaders(&mut self, timeout: Duration, except: Option<usize>) -> anyhow::Result<Vec<usize>> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if let Some(l) = self.leaders(except).await {
                return Ok(l);
            }
            if Instant::now() > deadline {
                bail!("no leader for every partition after {timeout:?}: {:?}", self.replicas().await);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// An error naming the broker and the end of its log if a broker the bench started exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        for b in &mut self.brokers {
            if let Some(child) = b.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    b.child = None;
                    let log = std::fs::read_to_string(b.log_path()).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    bail!(
                        "broker {} exited ({status}); its log ends:\n{}",
                        b.node_id,
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    );
                }
            }
        }
        Ok(())
    }

    /// Whether broker `node` is a healthy replica of every partition it holds, caught up: its
    /// `/health` is UP and, for each partition, it leads it, or it follows a leader it knows of
    /// and has applied at least what that partition's leader had applied when read just before.
    pub async fn caught_up(&self, node: usize) -> bool {
        // the others first: the node's own indexes are read after the leaders'
        let mut others = BTreeMap::new();
        for b in self.brokers.iter().filter(|b| b.is_running() && b.node_id != node) {
            if let Ok(r) = management::partitions(b.management_port).await {
                others.insert(b.node_id, r);
            }
        }
        let port = self.brokers[node].management_port;
        let Ok(own) = management::partitions(port).await else { return false };
        management::healthy(port).await && replica_caught_up(&own, &others, self.shape.partitions)
    }

    /// Each running broker's CPU time and memory, by node id.
    pub fn samples(&self) -> Vec<(usize, server::ProcSample)> {
        self.brokers.iter().filter_map(|b| Some((b.node_id, server::sample(b.pid()?).ok()?))).collect()
    }
}

/// The leader of each partition `1..=partitions` among the brokers' replicas other than
/// `except`'s: the broker whose replica is `LEADER`, the highest term's if two say so.
pub fn leaders_of(replicas: &BTreeMap<usize, Vec<Replica>>, partitions: u16, except: Option<usize>) -> Option<Vec<usize>> {
    (1..=partitions).map(|p| leader_in(replicas, p, except)).collect()
}

/// The leader of `partition` among the brokers' replicas other than `except`'s (see
/// [`leaders_of`]).
pub fn leader_in(replicas: &BTreeMap<usize, Vec<Replica>>, partition: u16, except: Option<usize>) -> Option<usize> {
    replicas
        .iter()
        .filter(|(node, _)| Some(**node) != except)
        .filter_map(|(node, rs)| rs.iter().find(|r| r.partition_id == partition && r.is_leader()).map(|r| (r.term, *node)))
        .max()
        .map(|(_, node)| node)
}

/// Whether `own` (a broker's replicas) holds every partition `1..=partitions` as its leader, or
/// as a follower that knows a leader and has applied at least that partition's leader's applied
/// index in `others` (read before `own`).
pub fn replica_caught_up(own: &[Replica], others: &BTreeMap<usize, Vec<Replica>>, partitions: u16) -> bool {
    (1..=partitions).all(|p| {
        let Some(mine) = own.iter().find(|r| r.partition_id == p) else { return false };
        if mine.is_leader() {
            return true;
        }
        let leader = others.values().flatten().filter(|r| r.partition_id == p && r.is_leader()).max_by_key(|r| r.term);
        match (mine.leader, leader) {
            (Some(_), Some(l)) => mine.role == "FOLLOWER" && mine.applied_index >= l.applied_index,
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(p: u16, role: &str, leader: Option<u64>, term: u64, applied: u64) -> Replica {
        Replica { partition_id: p, role: role.into(), leader, term, applied_index: applied }
    }

    #[test]
    fn finds_the_leaders_and_judges_catch_up() {
        let mut others = BTreeMap::new();
        others.insert(0, vec![replica(1, "LEADER", Some(0), 2, 100), replica(2, "FOLLOWER", Some(1), 1, 50)]);
        others.insert(1, vec![replica(1, "FOLLOWER", Some(0), 2, 99), replica(2, "LEADER", Some(1), 1, 60)]);
        assert_eq!(leaders_of(&others, 2, None), Some(vec![0, 1]));
        assert_eq!(leaders_of(&others, 2, Some(1)), None, "partition 2 has no leader without broker 1");
        assert_eq!(leaders_of(&others, 3, None), None);

        let behind = [replica(1, "FOLLOWER", Some(0), 2, 99), replica(2, "FOLLOWER", Some(1), 1, 60)];
        assert!(!replica_caught_up(&behind, &others, 2));
        let caught = [replica(1, "FOLLOWER", Some(0), 2, 100), replica(2, "FOLLOWER", Some(1), 1, 61)];
        assert!(replica_caught_up(&caught, &others, 2));
        let no_leader = [replica(1, "FOLLOWER", None, 2, 100), replica(2, "FOLLOWER", Some(1), 1, 61)];
        assert!(!replica_caught_up(&no_leader, &others, 2), "a follower that knows no leader is not healthy");
        let leading = [replica(1, "LEADER", Some(2), 3, 0), replica(2, "FOLLOWER", Some(1), 1, 60)];
        assert!(replica_caught_up(&leading, &others, 2));
        assert!(!replica_caught_up(&caught[..1], &others, 2), "a partition it does not show is not caught up");
    }
}
