//! A running member of the gossip: publishes this node's state, keeps the cluster view current.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chitchat::transport::Transport;
use chitchat::{spawn_chitchat, Chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, ProtocolVersion};
use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tracing::debug;

use crate::config::MembershipConfig;
use crate::state::{self, NodeState, PartitionState, PARTITIONS_KEY};
use crate::transport::BoundSocket;
use crate::view::{ClusterView, Member};
use crate::Error;

/// This node's membership in the cluster. Stops gossiping when shut down or dropped; peers then
/// declare it dead within a few seconds (there is no leave message).
pub struct Membership {
    node_id: u64,
    gossip_addr: SocketAddr,
    /// `None` only once shut down.
    handle: Option<ChitchatHandle>,
    chitchat: Arc<Mutex<Chitchat>>,
    /// This node's partitions as last published; guarded by `chitchat`'s lock for writers.
    partitions: std::sync::Mutex<Vec<PartitionState>>,
    view_tx: Arc<watch::Sender<ClusterView>>,
    publisher: JoinHandle<()>,
}

impl Membership {
    /// Binds the gossip socket, announces `initial` and starts gossiping with the seeds.
    pub async fn start(config: MembershipConfig, initial: NodeState) -> Result<Membership, Error> {
        config.validate()?;
        let partitions = state::normalise_partitions(initial.partitions.clone())?;
        let initial = NodeState { partitions: partitions.clone(), ..initial };
        let key_values = state::encode(&initial)?;

        let (transport, bound) = BoundSocket::bind(config.gossip_addr)
            .await
            .map_err(|source| Error::Bind { addr: config.gossip_addr, source: source.into() })?;
        let gossip_addr = match config.advertise_addr {
            Some(addr) if addr.port() == 0 => SocketAddr::new(addr.ip(), bound.port()),
            Some(addr) => addr,
            None => bound,
        };
        let gossip_id = config.gossip_id.clone().unwrap_or_else(|| config.node_id.to_string());
        let chitchat_id = ChitchatId::new(gossip_id, generation(), gossip_addr);
        let chitchat_config = ChitchatConfig {
            chitchat_id,
            cluster_id: config.cluster_id.clone(),
            gossip_interval: config.gossip_interval,
            listen_addr: bound,
            seed_nodes: config.seeds.clone(),
            failure_detector_config: config.failure_detector(),
            marked_for_deletion_grace_period: config.dead_node_grace_period,
            catchup_callback: None,
            extra_liveness_predicate: None,
            protocol_version: ProtocolVersion::V0,
        };
        let handle = spawn_chitchat(chitchat_config, key_values, &transport as &dyn Transport)
            .await
            .map_err(|source| Error::Bind { addr: config.gossip_addr, source: source.into() })?;
        let chitchat = handle.chitchat();

        let (view_tx, _) = watch::channel(build_view(&*chitchat.lock().await));
        let view_tx = Arc::new(view_tx);
        let publisher = tokio::spawn(publish_loop(chitchat.clone(), view_tx.clone(), config.gossip_interval));
        Ok(Membership {
            node_id: config.node_id,
            gossip_addr,
            handle: Some(handle),
            chitchat,
            partitions: std::sync::Mutex::new(partitions),
            view_tx,
            publisher,
        })
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The address peers gossip with this node at.
    pub fn gossip_addr(&self) -> SocketAddr {
        self.gossip_addr
    }

    /// The current view of the cluster (this node's own changes included at once).
    pub fn view(&self) -> ClusterView {
        self.view_tx.borrow().clone()
    }

    /// The current members, ordered by node id.
    pub fn members(&self) -> Vec<Member> {
        self.view_tx.borrow().members().to_vec()
    }

    /// A receiver whose value is the view, marked changed whenever a member joins, dies, comes
    /// back or changes its state.
    pub fn subscribe(&self) -> watch::Receiver<ClusterView> {
        self.view_tx.subscribe()
    }

    /// The alive node claiming leadership of `partition_id` in the highest term, and its state.
    pub fn leader_of(&self, partition_id: u16) -> Option<(u64, NodeState)> {
        self.view_tx.borrow().leader_of(partition_id).map(|m| (m.node_id, m.state.clone()))
    }

    /// Publishes this node's partitions, replacing the previous ones. An id given twice is an error.
    pub async fn update_partitions(&self, partitions: Vec<PartitionState>) -> Result<(), Error> {
        let partitions = state::normalise_partitions(partitions)?;
        let mut chitchat = self.chitchat.lock().await;
        self.publish_partitions(&mut chitchat, partitions)
    }

    /// Publishes this node's state in one partition, replacing that partition's previous state.
    pub async fn update_partition(&self, partition: PartitionState) -> Result<(), Error> {
        let mut chitchat = self.chitchat.lock().await;
        let mut partitions = self.lock_partitions().clone();
        partitions.retain(|p| p.partition_id != partition.partition_id);
        partitions.push(partition);
        self.publish_partitions(&mut chitchat, state::normalise_partitions(partitions)?)
    }

    /// The silence after which `node_id`'s current run will be declared dead, as the failure
    /// detector estimates it now. `None` for this node, unknown nodes and nodes not heard from
    /// enough yet.
    pub async fn failure_detection_timeout(&self, node_id: u64) -> Option<Duration> {
        let chitchat = self.chitchat.lock().await;
        let latest =
            chitchat.node_states().keys().filter(|id| id.node_id.parse() == Ok(node_id)).max_by_key(|id| id.generation_id)?.clone();
        chitchat.failure_detection_timeout(&latest)
    }

    /// Stops gossiping and waits for the gossip task to end.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        self.publisher.abort();
        match self.handle.take() {
            Some(handle) => handle.shutdown().await.map_err(|source| Error::Shutdown(source.into())),
            None => Ok(()),
        }
    }

    /// Sets the partitions key (under the chitchat lock, so writers are serialised) and the view.
    fn publish_partitions(&self, chitchat: &mut Chitchat, partitions: Vec<PartitionState>) -> Result<(), Error> {
        chitchat.self_node_state().set(PARTITIONS_KEY, state::encode_partitions(&partitions)?);
        *self.lock_partitions() = partitions;
        publish(&self.view_tx, build_view(chitchat));
        Ok(())
    }

    fn lock_partitions(&self) -> std::sync::MutexGuard<'_, Vec<PartitionState>> {
        self.partitions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Membership {
    /// Stops the view publisher; dropping the chitchat handle stops the gossip task.
    fn drop(&mut self) {
        self.publisher.abort();
    }
}

/// A generation greater than any earlier run's of this node: the start time in microseconds. (A
/// clock set back between two runs hides the new run behind the old, dead one until the old one
/// is forgotten after the dead-node grace period.)
fn generation() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Rebuilds the view whenever chitchat reports a change among the live nodes, and at least every
/// gossip interval (deaths of nodes already dead, forgotten nodes).
async fn publish_loop(chitchat: Arc<Mutex<Chitchat>>, view_tx: Arc<watch::Sender<ClusterView>>, every: Duration) {
    let mut live_nodes = chitchat.lock().await.live_nodes_watcher();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            changed = live_nodes.changed() => if changed.is_err() { return },
            _ = tick.tick() => {}
        }
        let view = build_view(&*chitchat.lock().await);
        publish(&view_tx, view);
    }
}

/// Replaces the view if it changed, waking subscribers only then.
fn publish(view_tx: &watch::Sender<ClusterView>, view: ClusterView) {
    view_tx.send_if_modified(|current| {
        let changed = *current != view;
        if changed {
            *current = view;
        }
        changed
    });
}

/// The view of every node whose id is a number and whose state has arrived and can be read.
fn build_view(chitchat: &Chitchat) -> ClusterView {
    let live: HashSet<&ChitchatId> = chitchat.live_nodes().collect();
    let runs = chitchat.node_states().iter().filter_map(|(id, node)| {
        let Ok(node_id) = id.node_id.parse::<u64>() else {
            debug!(node = ?id, "ignoring a gossip member whose id is not a number");
            return None;
        };
        let state = state::decode(|key| node.get(key))?;
        Some(Member { node_id, gossip_addr: id.gossip_advertise_addr, generation: id.generation_id, state, alive: live.contains(id) })
    });
    ClusterView::from_runs(runs)
}
