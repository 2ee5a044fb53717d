//! Job push across brokers: a `StreamActivatedJobs` stream opened at one broker's gateway gets
//! the jobs of every partition, wherever its leader is (as Zeebe's gateway registers each job
//! stream with every broker).
//!
//! Each broker keeps one `JobStreams` session with each other broker ([`StreamAnnouncer`]): it
//! announces the streams its own clients opened ([`JobStreamRegistry::local_streams`]) and their
//! closing. The other broker ([`JobStreamsService`]) registers each announced stream in its own
//! registry as a remote stream with a small buffer of its own, so its partitions pick it like a
//! local one; the jobs they push to it are sent back in the session, and the announcing broker
//! hands them to its client's stream ([`JobStreamRegistry::deliver`]). A job that client cannot
//! take (gone, or full) goes back in the session as a yield, and the broker that activated it
//! returns it to its partition's pool (JOB YIELD) at once. When a session ends (either broker
//! stopped, the network failed) the serving broker forgets the session's streams and yields the
//! jobs it still held for them; the announcing broker reconnects and announces again. The serving
//! broker also passes on its "jobs of a type became activatable" notices, so that a long poll
//! waiting at the announcing broker wakes for jobs of partitions led elsewhere.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Endpoint;
use waggle_replication::net::Connector;

use crate::forward::pb;
use crate::streams::{JobStreamRegistry, LocalStream, PushedJob, StreamId, StreamSettings};

/// Jobs a remote stream holds on the broker that activates them, before they are sent on: as
/// many as a local stream's (the gateway's `STREAM_BUFFER_JOBS`), since a batch pushes its jobs
/// in one go, before the forwarding task sends any. With 32, W7 (W2 on 3 brokers) pushed 91.7 %
/// of its jobs: the rest found the stream full and waited for the worker's next poll, and job
/// activation's p99 was 1.1 s. The channel allocates as it fills, not up front.
const REMOTE_STREAM_BUFFER: usize = 512;
/// Jobs on their way through one session.
const SESSION_BUFFER: usize = 256;
/// How long a remote stream whose client could not take a job is left out (see
/// `JobStreamRegistry::pause`).
const PAUSE_AFTER_YIELD: Duration = Duration::from_millis(100);
/// How often an announcer looks for streams opened or closed.
const ANNOUNCE_EVERY: Duration = Duration::from_millis(20);
/// Wait before reconnecting a failed session (doubling up to [`MAX_BACKOFF`]).
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// "Jobs of a type became activatable" notices as a long poll waits for them: its broker's own
/// partitions', and in a cluster those other brokers passed on. The two come on separate channels
/// because a broker passes on only its own partitions' notices: passing on what it received too
/// would send each notice back and forth between brokers without end.
pub struct JobsAvailable {
    own: broadcast::Receiver<String>,
    relayed: Option<broadcast::Receiver<String>>,
}

impl JobsAvailable {
    pub fn new(own: broadcast::Receiver<String>, relayed: Option<broadcast::Receiver<String>>) -> Self {
        Self { own, relayed }
    }

    /// The next notice's job type, from either channel.
    pub async fn recv(&mut self) -> Result<String, broadcast::error::RecvError> {
        match &mut self.relayed {
            None => self.own.recv().await,
            Some(relayed) => tokio::select! {
                notice = self.own.recv() => notice,
                notice = relayed.recv() => notice,
            },
        }
    }
}

/// Returns jobs to their partition's pool (JOB YIELD); on a broker, [`crate::Broker::yield_jobs`].
pub type Yielder = Arc<dyn Fn(Vec<PushedJob>) + Send + Sync>;

fn encode_job(job: &PushedJob) -> Vec<u8> {
    postcard::to_stdvec(&(job.key, &job.record)).expect("jobs encode")
}

fn decode_job(bytes: &[u8]) -> Option<PushedJob> {
    let (key, record) = postcard::from_bytes(bytes).ok()?;
    Some(PushedJob { key, record })
}

/// The serving side: takes other brokers' sessions and pushes this broker's jobs to their streams.
pub struct JobStreamsService {
    registry: Arc<JobStreamRegistry>,
    yielder: Yielder,
    /// This broker's "jobs of a type became activatable" notices, passed on in every session.
    jobs_available: broadcast::Sender<String>,
}

impl JobStreamsService {
    pub fn new(
        registry: Arc<JobStreamRegistry>,
        yielder: Yielder,
        jobs_available: broadcast::Sender<String>,
    ) -> pb::job_streams_server::JobStreamsServer<Self> {
        pb::job_streams_server::JobStreamsServer::new(Self { registry, yielder, jobs_available })
    }
}

/// Passes this broker's "jobs available" notices on to a session until it ends (the announcing
/// broker wakes its long polls: a poll there may be waiting for jobs of partitions led here).
async fn pass_on_notices(mut notices: broadcast::Receiver<String>, session: mpsc::Sender<Result<pb::PushedJobs, tonic::Status>>) {
    loop {
        let job_type = match notices.recv().await {
            Ok(job_type) => job_type,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let notice = pb::PushedJobs { stream_id: 0, job: Vec::new(), jobs_available: job_type };
        if session.send(Ok(notice)).await.is_err() {
            return;
        }
    }
}

/// Sends the jobs pushed to one remote stream into its session; once the session is gone, yields
/// them (and everything still buffered) back to the pool.
async fn forward_stream(
    remote_id: StreamId,
    mut jobs: mpsc::Receiver<PushedJob>,
    session: mpsc::Sender<Result<pb::PushedJobs, tonic::Status>>,
    yielder: Yielder,
) {
    while let Some(job) = jobs.recv().await {
        let message = pb::PushedJobs { stream_id: remote_id, job: encode_job(&job), jobs_available: String::new() };
        if session.send(Ok(message)).await.is_err() {
            jobs.close();
            let mut back = vec![job];
            while let Ok(job) = jobs.try_recv() {
                back.push(job);
            }
            yielder(back);
            return;
        }
    }
}

#[tonic::async_trait]
impl pb::job_streams_server::JobStreams for JobStreamsService {
    type SessionStream = ReceiverStream<Result<pb::PushedJobs, tonic::Status>>;

    async fn session(
        &self,
        request: tonic::Request<tonic::Streaming<pb::StreamControl>>,
    ) -> Result<tonic::Response<Self::SessionStream>, tonic::Status> {
        let mut controls = request.into_inner();
        let (session, pushed) = mpsc::channel(SESSION_BUFFER);
        let registry = self.registry.clone();
        let yielder = self.yielder.clone();
        let notices = tokio::spawn(pass_on_notices(self.jobs_available.subscribe(), session.clone()));
        tokio::spawn(async move {
            // the announcing broker's stream id -> this registry's id for it
            let mut streams: HashMap<StreamId, StreamId> = HashMap::new();
            while let Ok(Some(control)) = controls.message().await {
                match control.control {
                    Some(pb::stream_control::Control::Add(add)) => {
                        let (sender, jobs) = mpsc::channel(REMOTE_STREAM_BUFFER);
                        let settings = StreamSettings {
                            job_type: add.job_type,
                            worker: add.worker,
                            timeout_ms: add.timeout_ms,
                            fetch_variables: add.fetch_variables,
                            tenant_ids: add.tenant_ids,
                        };
                        let id = registry.register_remote(settings, sender);
                        if let Some(old) = streams.insert(add.id, id) {
                            registry.remove(old);
                        }
                        tokio::spawn(forward_stream(add.id, jobs, session.clone(), yielder.clone()));
                    }
                    Some(pb::stream_control::Control::Remove(id)) => {
                        // dropping its sender ends its forwarding task once the buffer is sent
                        if let Some(local) = streams.remove(&id) {
                            registry.remove(local);
                        }
                    }
                    Some(pb::stream_control::Control::YieldJob(yielded)) => {
                        // its client is behind: give it nothing for a moment, and the job to others
                        if let Some(local) = streams.get(&yielded.stream_id) {
                            registry.pause(*local, PAUSE_AFTER_YIELD);
                        }
                        if let Some(job) = decode_job(&yielded.job) {
                            yielder(vec![job]);
                        }
                    }
                    None => {}
                }
            }
            // the session ended: its streams go; their tasks yield what they still hold
            notices.abort();
            for (_, local) in streams {
                registry.remove(local);
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(pushed)))
    }
}

/// The announcing side: keeps a session with each other broker (reconnecting as needed),
/// announcing this broker's streams and delivering the jobs that come back. Brokers learned at
/// run time (started later, or moved) get a session too ([`Self::connect`]).
pub struct StreamAnnouncer {
    runtime: tokio::runtime::Handle,
    registry: Arc<JobStreamRegistry>,
    jobs_available: broadcast::Sender<String>,
    connector: Option<Connector>,
    sessions: HashMap<SocketAddr, tokio::task::JoinHandle<()>>,
}

impl StreamAnnouncer {
    /// Starts a session with each broker in `peers` (their addresses serving [`JobStreamsService`])
    /// on `runtime`; the other brokers' "jobs available" notices go out on `jobs_available`.
    /// Sessions connect through `connector` (mutual TLS) when given, else over TCP.
    pub fn start(
        runtime: &tokio::runtime::Handle,
        registry: Arc<JobStreamRegistry>,
        peers: Vec<SocketAddr>,
        jobs_available: broadcast::Sender<String>,
        connector: Option<Connector>,
    ) -> Self {
        let mut announcer = Self { runtime: runtime.clone(), registry, jobs_available, connector, sessions: HashMap::new() };
        for peer in peers {
            announcer.connect(peer);
        }
        announcer
    }

    /// Keeps a session with the broker at `peer` too (nothing if one is kept already).
    pub fn connect(&mut self, peer: SocketAddr) {
        let (registry, jobs_available, connector) = (&self.registry, &self.jobs_available, &self.connector);
        self.sessions
            .entry(peer)
            .or_insert_with(|| self.runtime.spawn(keep_session(registry.clone(), peer, jobs_available.clone(), connector.clone())));
    }

    /// Ends the session with the broker at `peer` (one that moved to another address): the
    /// serving side forgets its streams.
    pub fn disconnect(&mut self, peer: SocketAddr) {
        if let Some(task) = self.sessions.remove(&peer) {
            task.abort();
        }
    }
}

impl Drop for StreamAnnouncer {
    fn drop(&mut self) {
        for task in self.sessions.values() {
            task.abort();
        }
    }
}

fn add_control(s: &LocalStream) -> pb::StreamControl {
    pb::StreamControl {
        control: Some(pb::stream_control::Control::Add(pb::AddStream {
            id: s.id,
            job_type: s.job_type.clone(),
            worker: s.worker.clone(),
            timeout_ms: s.timeout_ms,
            fetch_variables: s.fetch_variables.clone(),
            tenant_ids: s.tenant_ids.clone(),
        })),
    }
}

/// Keeps a session with `peer` (reconnecting with back-off) until the task is aborted.
pub(crate) async fn keep_session(
    registry: Arc<JobStreamRegistry>,
    peer: SocketAddr,
    jobs_available: broadcast::Sender<String>,
    connector: Option<Connector>,
) {
    let mut backoff = MIN_BACKOFF;
    loop {
        let started = tokio::time::Instant::now();
        if let Err(e) = session(&registry, peer, &jobs_available, connector.as_ref()).await {
            tracing::debug!(%peer, error = %e, "job stream session ended");
        }
        if started.elapsed() > Duration::from_secs(5) {
            backoff = MIN_BACKOFF;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One session with `peer`: announces every local stream, then follows opened and closed ones and
/// delivers what `peer` pushes, until the session fails.
async fn session(
    registry: &JobStreamRegistry,
    peer: SocketAddr,
    jobs_available: &broadcast::Sender<String>,
    connector: Option<&Connector>,
) -> Result<(), tonic::Status> {
    let endpoint = Endpoint::from_shared(format!("http://{peer}"))
        .expect("a socket address is a valid URI")
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_secs(2));
    let channel = match connector {
        None => endpoint.connect_timeout(Duration::from_secs(1)).connect().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?,
        Some(connect) => connect(endpoint),
    };
    let (controls, outgoing) = mpsc::channel(SESSION_BUFFER);
    let mut client = pb::job_streams_client::JobStreamsClient::new(channel);
    let mut pushed = client.session(ReceiverStream::new(outgoing)).await?.into_inner();
    let mut announced: HashMap<StreamId, LocalStream> = HashMap::new();
    let mut generation = None;
    let mut tick = tokio::time::interval(ANNOUNCE_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = registry.generation();
                if generation == Some(now) {
                    continue;
                }
                generation = Some(now);
                let current: HashMap<StreamId, LocalStream> = registry.local_streams().into_iter().map(|s| (s.id, s)).collect();
                for id in announced.keys().filter(|id| !current.contains_key(id)) {
                    let remove = pb::StreamControl { control: Some(pb::stream_control::Control::Remove(*id)) };
                    controls.send(remove).await.map_err(|_| tonic::Status::cancelled("session closed"))?;
                }
                for stream in current.values().filter(|s| !announced.contains_key(&s.id)) {
                    controls.send(add_control(stream)).await.map_err(|_| tonic::Status::cancelled("session closed"))?;
                }
                announced = current;
            }
            message = pushed.next() => {
                let Some(message) = message else { return Ok(()) };
                let message = message?;
                if !message.jobs_available.is_empty() {
                    // no receiver (no long poll waiting) is fine
                    let _ = jobs_available.send(message.jobs_available);
                    continue;
                }
                let Some(job) = decode_job(&message.job) else { continue };
                if let Some(job) = registry.deliver(message.stream_id, job) {
                    let yielded = pb::YieldedJob { stream_id: message.stream_id, job: encode_job(&job) };
                    let back = pb::StreamControl { control: Some(pb::stream_control::Control::YieldJob(yielded)) };
                    controls.send(back).await.map_err(|_| tonic::Status::cancelled("session closed"))?;
                }
            }
        }
    }
}
