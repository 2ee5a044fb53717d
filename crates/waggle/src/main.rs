//! `waggle`: a Zeebe-compatible BPMN process engine in one binary.

mod config;
mod gateway;
mod gossip;
mod management;
mod persisted;
mod security;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use waggle_broker::{Broker, BrokerConfig, ClusterSpec};
use waggle_gateway::{GatewayConfig, GatewayService, GrpcServer, StandaloneTopology, TopologySource};

use config::{BrokerArgs, NodeArgs};

#[derive(Parser)]
#[command(
    name = "waggle",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("WAGGLE_BUILD"), ")"),
    about = "A Zeebe-compatible BPMN process engine.\n\nWith no subcommand, runs `standalone`: broker and gateway in one process, data in ./data, gRPC on 127.0.0.1:26500, management on 9600.",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    node: NodeArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Broker and gateway in one process (the default).
    Standalone(Box<NodeArgs>),
    /// A broker of a cluster, with its gateway: every standalone flag, and the broker's node id,
    /// the cluster's size, replication factor and contact points, and the internal port
    /// (`waggle broker --help`).
    Broker(Box<BrokerArgs>),
    /// A standalone gateway in front of a cluster of brokers: no data, no partitions; it learns the
    /// brokers, partitions and leaders from their gossip through --contact-points and routes every
    /// request to the partition's leader (`waggle gateway --help`).
    Gateway(Box<gateway::config::GatewayArgs>),
    /// Rebuilds the data folder from a backup in the backup store (`--backup-id N`, with the
    /// node's --data-dir, backup store and --partitions; a broker's also with its cluster
    /// settings, --node-id, --cluster-size or --contact-points, --replication-factor): refuses
    /// a data folder that is not empty and a backup that is not complete (docs/operations.md).
    Restore(Box<RestoreArgs>),
    /// Zeebe's benchmark over the gateway protocol, against Waggle
    /// (`waggle bench run|compare|smoke --help`).
    Bench(Box<waggle_bench::BenchArgs>),
}

/// `waggle restore`: a node's settings and the backup to restore.
#[derive(clap::Args)]
struct RestoreArgs {
    /// The id of the backup to restore (as given to `POST /actuator/backups`).
    #[arg(long)]
    backup_id: u64,
    #[command(flatten)]
    broker: BrokerArgs,
}

/// Restores backup `args.backup_id` into the node's data folder: on a broker, the partitions
/// it holds a replica of in the cluster topology the backup recorded (every replica of a
/// partition gets the same state and log position), with that topology (and its routing state,
/// once the partition count grew) written into the folder so the broker starts with it; a
/// backup without one (an earlier version's) by the static placement. `--partitions` is the
/// backup's count, or any count the recorded topology runs with (a grown cluster's configured
/// one); `cluster.json` records it.
fn restore(args: &RestoreArgs) -> anyhow::Result<()> {
    let (config, cluster) = args.broker.resolve_restore()?;
    let store_config = config
        .backup_store
        .clone()
        .context("waggle restore needs a backup store: --backup-store or --backup-s3-bucket (or the config file's)")?;
    let store = waggle_broker::backup::BackupStore::open(&store_config)?;
    let info = store.info(args.backup_id)?;
    let topology = match &cluster {
        Some(c) => recorded_layout(&store, args.backup_id, c)?,
        None => None,
    };
    // the backup's partition count, or (a cluster grown at run time) any count its brokers run
    // the recorded topology with: the one they were configured with too
    let backed_up = info.details.len();
    let fitting: Vec<u16> = match &topology {
        Some(t) if usize::from(t.partition_count()) == backed_up => {
            (1..=t.partition_count()).filter(|&n| t.fits_configured_count(n)).collect()
        }
        _ => u16::try_from(backed_up).into_iter().collect(),
    };
    anyhow::ensure!(
        fitting.contains(&config.partitions),
        "backup {} has {backed_up} partition(s) but --partitions is {}: restore with --partitions {}",
        args.backup_id,
        config.partitions,
        fitting.iter().map(u16::to_string).collect::<Vec<_>>().join(" or ")
    );
    let hosts = |p| match (&cluster, &topology) {
        (None, _) => true,
        (Some(c), Some(t)) => t.replica(c.node_id, p).is_some(),
        (Some(c), None) => c.hosts(p),
    };
    let restored = waggle_broker::backup::restore(&store, args.backup_id, &config.data_dir, hosts)?;
    if let Some(t) = &topology {
        // a broker the topology gives no replica has no folder yet
        std::fs::create_dir_all(&config.data_dir).with_context(|| format!("creating {}", config.data_dir.display()))?;
        t.save(&config.data_dir).with_context(|| format!("writing the recorded cluster topology into {}", config.data_dir.display()))?;
    }
    persisted::record_restored(&config.data_dir, &persisted::DataSettings::of(config.partitions, cluster.as_ref()))?;
    for r in &restored {
        tracing::info!(backup = args.backup_id, partition = r.partition, position = r.position, "partition restored");
    }
    println!("restored backup {} into {} ({} partition(s))", args.backup_id, config.data_dir.display(), restored.len());
    Ok(())
}

/// The cluster topology backup `id` recorded, for broker `cluster.node_id` to restore (with
/// its routing state, if the partition count grew): refused when the broker is not in it;
/// `None` for a backup that recorded none (an earlier version's: the static placement decides).
fn recorded_layout(
    store: &waggle_broker::backup::BackupStore,
    id: u64,
    cluster: &ClusterSpec,
) -> anyhow::Result<Option<waggle_broker::topology::Topology>> {
    let Some(t) = store.topology(id)? else { return Ok(None) };
    let brokers: Vec<u64> = t.brokers.keys().copied().collect();
    anyhow::ensure!(
        t.brokers.contains_key(&cluster.node_id),
        "broker {} is not in the cluster topology backup {id} recorded (its brokers are {brokers:?}): restore the backup on \
         those brokers, each with its --node-id",
        cluster.node_id
    );
    let held: Vec<u16> = (1..=t.partition_count()).filter(|&p| t.replica(cluster.node_id, p).is_some()).collect();
    tracing::info!(backup = id, version = t.version, brokers = ?brokers, partitions = ?held, routing = ?t.routing, "restoring the recorded cluster topology's replicas of this broker");
    Ok(Some(t))
}

/// jemalloc instead of glibc's malloc, for the server and the bench client alike. glibc's
/// `malloc`, `free` and their consolidation were ~16 % of the partition thread and ~18 % of the
/// gateway thread under W2; with jemalloc the server's CPU per W2 instance fell ~11 % (three
/// alternating pairs, normalised by the client's), with peak RSS under W2 58-66 MB against
/// glibc's 57-62 MB and idle RSS 25 against 24 MB. (mimalloc saved as much CPU but took RSS
/// under W2 to 80-99 MB; see docs/performance-history.md.)
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts (`_RJEM_MALLOC_CONF` in the environment overrides
/// them): one arena instead of four per core (each thread's arena kept its own freed pages: on
/// 2 cores the partition, gateway and exporter threads rarely contend for one), and freed pages
/// given back to the system after ~1 s instead of ~10, by jemalloc's own background thread (not
/// on the partition's). Under W2 the exporter frees several MB a second. Measured in
/// docs/performance.md (W6).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"narenas:1,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Runs the command; an error is printed as its message and its causes (no backtrace, whatever
/// `RUST_BACKTRACE` says: these are a user's mistakes, e.g. a refused data folder), exit code 1.
fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        // Raft's own lines (target `raft`: each election step, configuration changes) are
        // off by default; `WAGGLE_LOG=info` or `info,raft=info` shows them
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("WAGGLE_LOG").unwrap_or_else(|_| "info,raft=warn".into()))
        .with_writer(std::io::stderr)
        // colours only on a terminal: a log file (scripts/cluster.sh's) stays plain text
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let (config, cluster) = match cli.command {
        None => (cli.node.resolve()?, None),
        Some(Cmd::Standalone(args)) => (args.resolve()?, None),
        Some(Cmd::Broker(args)) => {
            let (config, cluster) = args.resolve()?;
            (config, Some(cluster))
        }
        Some(Cmd::Gateway(args)) => return gateway::run(&args),
        Some(Cmd::Restore(args)) => return restore(&args),
        Some(Cmd::Bench(args)) => {
            return waggle_bench::runtime()?.block_on(waggle_bench::run(*args));
        }
    };
    raise_open_files_limit();
    // before anything opens the data folder: a start that contradicts it changes nothing
    let grown = cluster.as_ref().and_then(|_| waggle_broker::topology::Topology::load(&config.data_dir).ok().flatten());
    let grown = grown.filter(|t| t.routing.is_some());
    let interchangeable = |stored: u16, given: u16| {
        grown.as_ref().is_some_and(|t| {
            let count = t.partition_count();
            // a cluster grown at run time started with the grown count, whatever smaller count
            // its folder was created with; or a folder created or restored with a larger count
            // (a grown one) than the start's, which its brokers were configured with
            (given == count && stored < count) || (given < stored && stored <= count && t.fits_configured_count(given))
        })
    };
    persisted::check_or_record(&config.data_dir, &persisted::DataSettings::of(config.partitions, cluster.as_ref()), interchangeable)?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        // a broker runs threads only for the partitions placement gives it
        let held = match &cluster {
            None => config.partitions,
            Some(c) => (1..=config.partitions).filter(|p| c.hosts(*p)).count() as u16,
        };
        runtime.worker_threads(gateway_threads(held));
    }
    runtime.enable_all().build()?.block_on(serve(config, cluster))
}

/// Raises the soft limit of open files to the hard limit (as Go's runtime does for its
/// programs): RocksDB keeps every table file of a partition open, and a snapshot sent to a
/// follower holds each of its files open for the transfer, so a big state (or several transfers
/// at once) outgrows the 1,024 a login session usually starts with. Logs the change; a refusal
/// is a warning, never fatal.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given, which lives on this stack frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= limit.rlim_max {
        return;
    }
    let was = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: setrlimit only reads the struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        tracing::info!(from = was, to = limit.rlim_max, "open files limit raised to the hard limit");
    } else {
        tracing::warn!(soft = was, hard = limit.rlim_max, error = %std::io::Error::last_os_error(), "could not raise the open files limit");
    }
}

/// Threads for the gateway and the management API: the cores the partition threads leave, at
/// least one (`TOKIO_WORKER_THREADS` overrides it). Each partition thread keeps a core busy
/// under load; on 2 cores with 1 partition a second gateway thread only competed with it (W2,
/// four alternating pairs of runs: 8,077-9,033 PI/s on one thread against 7,493-8,402 on two,
/// server CPU per instance 133-146 µs against 136-148).
fn gateway_threads(partitions: u16) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_sub(usize::from(partitions)).max(1)
}

/// The query store, if it is on: PostgreSQL, or the embedded file (by default on the standalone
/// node, off on a broker).
fn query_store_location(config: &config::NodeConfig, cluster: Option<&ClusterSpec>) -> Option<waggle_store::Location> {
    let embedded = || waggle_store::Location::Sqlite(waggle_store::path_in(&config.data_dir));
    match &config.query_store {
        Some(config::QueryStore::Postgres(url)) => Some(waggle_store::Location::Postgres(url.clone())),
        Some(config::QueryStore::Embedded(on)) => on.then(embedded),
        None => cluster.is_none().then(embedded),
    }
}

/// The exporters the configuration turns on.
fn export_config(
    config: &config::NodeConfig,
    query_store: Option<&waggle_store::Location>,
    store_changes: &waggle_store::Changes,
) -> anyhow::Result<waggle_broker::export::ExportConfig> {
    if let Some(entries) = config.ignored_exporter_max_backlog {
        tracing::warn!(
            entries,
            records = config.exporter_max_backlog_records,
            "exporter_max_backlog (log entries) is deprecated and ignored: the export backlog is bounded in records, by exporter_max_backlog_records"
        );
    }
    let mut exporters = Vec::new();
    if let Some(location) = query_store {
        let store = waggle_store::exporter::StoreConfig { location: location.clone(), history_ttl: config.query_store_history_ttl };
        let factory = waggle_store::exporter::factory_with_changes("query-store", store, store_changes.clone())
            .with_context(|| format!("opening the query store {location}"))?;
        exporters.push(Arc::new(factory));
    }
    if let Some(target) = &config.debug_exporter {
        let factory =
            waggle_exporter::debug::factory("debug", target).with_context(|| format!("opening the debug exporter's {target:?}"))?;
        exporters.push(Arc::new(factory));
    }
    Ok(waggle_broker::export::ExportConfig {
        exporters,
        stuck_after: config.exporter_stuck_after,
        max_backlog_records: config.exporter_max_backlog_records,
    })
}

/// Runs the node (the broker's partitions, the gateway, the management API) until SIGTERM.
async fn serve(config: config::NodeConfig, cluster: Option<ClusterSpec>) -> anyhow::Result<()> {
    let node_id = cluster.as_ref().map_or(0, |c| c.node_id);
    let cluster_log = cluster.as_ref().map(|c| {
        format!("node {} of {}, replication factor {}, internal {}", c.node_id, c.cluster_size(), c.replication_factor, c.address())
    });
    let started = Instant::now();
    let registry = prometheus::Registry::new();
    let query_store = query_store_location(&config, cluster.as_ref());
    // the store exporter's commits, which the web UI's live pages wait for
    let store_changes = waggle_store::Changes::default();
    // read before anything starts: a missing or unreadable file stops the broker here
    let internal_tls = match (&cluster, &config.internal_tls) {
        (Some(_), Some(files)) => Some(security::network::load(files)?),
        _ => None,
    };
    let gossip_cluster_id = security::network::gossip_cluster_id(internal_tls.as_deref());
    if let Some(files) = config.internal_tls.as_ref().filter(|_| internal_tls.is_some()) {
        tracing::info!(
            certificate = %files.certificate_chain_path.display(), ca = %files.ca_certificate_path.display(),
            "internal port: mutual TLS; peers must present a certificate signed by the CA (the UDP gossip stays plaintext, as Zeebe's)"
        );
    }
    let broker = Broker::start(
        BrokerConfig {
            data_dir: config.data_dir.clone(),
            partitions: config.partitions,
            queue_capacity: config.queue_capacity,
            backpressure: config.backpressure,
            snapshot_every_entries: config.snapshot_every_entries,
            limits: config.limits,
            cluster: cluster.clone(),
            // opening the query store checks its schema with blocking calls (PostgreSQL's client
            // runs a runtime of its own): on a thread outside the async runtime
            export: std::thread::scope(|s| {
                s.spawn(|| export_config(&config, query_store.as_ref(), &store_changes)).join().expect("opening the query store panicked")
            })?,
            disk: config.disk.clone(),
            backup_store: config.backup_store.clone(),
            internal_tls: internal_tls.clone(),
        },
        &registry,
    )
    .context("starting the broker")?;
    let grpc_addr: SocketAddr = format!("{}:{}", config.host, config.port).parse().context("gateway address")?;
    let mgmt_addr: SocketAddr =
        format!("{}:{}", config.management_host, config.management_port).parse().context("management address (--management-host)")?;
    let rest_addr: SocketAddr = format!("{}:{}", config.host, config.rest_port).parse().context("REST address")?;
    // a cluster broker gossips its membership, and describes the cluster from the gossip
    let (gossip, topology): (Option<gossip::Gossip>, Arc<dyn TopologySource>) = match &cluster {
        Some(spec) => {
            let (gossip, topology) = gossip::Gossip::start(spec, &gossip_cluster_id, &config.host, config.port, broker.clone())
                .await
                .context("starting the gossip")?;
            (Some(gossip), topology)
        }
        None => (None, Arc::new(StandaloneTopology { broker: broker.clone(), host: config.host.clone(), port: config.port })),
    };
    let gateway = GatewayService::new(
        broker.clone(),
        GatewayConfig {
            max_message_bytes: config.max_message_size,
            long_polling_timeout: Duration::from_millis(config.long_polling_timeout_ms),
            host: config.host.clone(),
            port: config.port,
            multi_tenancy: config.multi_tenancy,
        },
        &registry,
    )
    .with_topology(topology.clone());
    let gateway = Arc::new(gateway);
    let grpc_listener = tokio::net::TcpListener::bind(grpc_addr).await.with_context(|| format!("binding gRPC on {grpc_addr}"))?;
    let mgmt_listener = tokio::net::TcpListener::bind(mgmt_addr).await.with_context(|| format!("binding management on {mgmt_addr}"))?;
    let rest_listener = tokio::net::TcpListener::bind(rest_addr).await.with_context(|| format!("binding the REST API on {rest_addr}"))?;
    let store_reader = match &query_store {
        Some(location) => {
            // blocking calls (PostgreSQL's client runs a runtime of its own): off the async thread
            let (reader, version) = std::thread::scope(|s| {
                s.spawn(|| -> anyhow::Result<_> {
                    let reader =
                        waggle_store::Reader::new(location.clone()).with_context(|| format!("opening the query store {location}"))?;
                    let version =
                        reader.schema_version().with_context(|| format!("reading the query store's schema version at {location}"))?;
                    Ok((reader, version))
                })
                .join()
                .expect("opening the query store panicked")
            })?;
            tracing::info!(store = %location, schema_version = version, "query store opened");
            Some(Arc::new(reader.with_changes(store_changes.clone())))
        }
        None => None,
    };
    let tls = Acceptors::of(&config.security)?;
    let auth = authentication(&config.security)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let grpc_server = with_authentication(GrpcServer::from_arc(gateway.clone()), auth.as_ref());
    let grpc = tokio::spawn(serve_grpc(grpc_listener, grpc_server, tls.grpc, stop_rx.clone()));
    let rest_router = waggle_rest::router(Arc::new(waggle_rest::RestState { store: store_reader, gateway, topology: topology.clone() }));
    let rest_router = protect_rest(security::body_limit::limit(rest_router, config.rest_max_body_size), auth.as_ref());
    let rest = tokio::spawn(security::serve::http(rest_listener, rest_router, tls.http.clone(), stopped(stop_rx.clone())));
    let mgmt_router = management::router(management::ManagementState { broker: broker.clone(), registry, node_id, topology });
    let mgmt = tokio::spawn(security::serve::http(
        mgmt_listener,
        protect_management(mgmt_router, auth.as_ref()),
        tls.http,
        stopped(stop_rx.clone()),
    ));
    log_management(mgmt_addr);
    tracing::info!(
        grpc = %grpc_addr, management = %mgmt_addr, rest = %rest_addr, partitions = config.partitions, cluster = cluster_log.as_deref().unwrap_or("none (standalone)"),
        tls = config.security.tls.is_some(), internal_mtls = internal_tls.is_some(), basic_auth_users = config.security.basic_auth.as_ref().map_or(0, |u| u.count()),
        oauth_issuer = config.security.oidc.as_ref().map_or("none", |o| o.issuer_uri.as_str()),
        data = %config.data_dir.display(), ready_ms = started.elapsed().as_millis() as u64, build = env!("WAGGLE_BUILD"),
        "waggle is ready"
    );
    shutdown_signal().await;
    tracing::info!("shutting down");
    // in a cluster, the partitions this broker leads go to other replicas first, while its
    // gateway and network still serve: their clients see no election timeout
    let b = broker.clone();
    let _ = tokio::task::spawn_blocking(move || b.hand_over(HAND_OVER_LIMIT)).await;
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), grpc).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), mgmt).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), rest).await;
    if let Some(gossip) = gossip {
        gossip.shutdown().await;
    }
    let b = broker.clone();
    // a partition stops after its batch in progress; one stuck (a bug, a hung disk) must not
    // keep the process from exiting: what it acknowledged is in its fsynced log already
    match tokio::time::timeout(SHUTDOWN_LIMIT, tokio::task::spawn_blocking(move || b.shutdown())).await {
        Ok(joined) => joined?,
        Err(_) => {
            tracing::error!(limit_s = SHUTDOWN_LIMIT.as_secs(), "partitions did not stop in time; exiting without them");
            // returning would drop the runtime, and that waits for the stuck thread for good
            std::process::exit(1);
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// The TLS acceptors of the node's ports, when TLS is on.
struct Acceptors {
    grpc: Option<tokio_rustls::TlsAcceptor>,
    http: Option<tokio_rustls::TlsAcceptor>,
}

impl Acceptors {
    /// Reads the certificate chain and key now: a bad file stops the start-up with its reason.
    fn of(security: &security::SecurityConfig) -> anyhow::Result<Self> {
        let Some(files) = &security.tls else { return Ok(Self { grpc: None, http: None }) };
        Ok(Self {
            grpc: Some(security::tls::acceptor(files, security::tls::GRPC_ALPN).context("TLS (--security-enabled)")?),
            http: Some(security::tls::acceptor(files, security::tls::HTTP_ALPN).context("TLS (--security-enabled)")?),
        })
    }
}

/// The credentials the ports take (`None`: authentication off). With OAuth 2 on, the issuer's
/// keys are fetched in the background now, so a wrong issuer shows in the log at start-up.
fn authentication(security: &security::SecurityConfig) -> anyhow::Result<Option<Arc<security::authenticate::Authentication>>> {
    let bearer = match &security.oidc {
        Some(settings) => {
            let validator = security::bearer::BearerValidator::new(settings.clone()).context("the OAuth 2 HTTP client")?;
            let prefetch = validator.clone();
            tokio::spawn(async move { prefetch.prefetch().await });
            Some(validator)
        }
        None => None,
    };
    Ok(security::authenticate::Authentication::new(security.basic_auth.clone(), bearer))
}

/// The gRPC server, authenticating every call when authentication is on.
fn with_authentication(server: GrpcServer, auth: Option<&Arc<security::authenticate::Authentication>>) -> GrpcServer {
    match auth {
        Some(auth) => server.with_authenticator(auth.clone()),
        None => server,
    }
}

/// The REST API's router, behind authentication when it is on.
fn protect_rest(router: axum::Router, auth: Option<&Arc<security::authenticate::Authentication>>) -> axum::Router {
    match auth {
        Some(auth) => router.layer(axum::middleware::from_fn_with_state(auth.clone(), security::authenticate::require)),
        None => router,
    }
}

/// The management router, its state-changing `/actuator` endpoints behind authentication when
/// it is on.
fn protect_management(router: axum::Router, auth: Option<&Arc<security::authenticate::Authentication>>) -> axum::Router {
    match auth {
        Some(auth) => router.layer(axum::middleware::from_fn_with_state(auth.clone(), security::authenticate::require_for_changes)),
        None => router,
    }
}

/// Says where the management port listens and whether only this host can reach it.
fn log_management(addr: SocketAddr) {
    if addr.ip().is_loopback() {
        tracing::info!(management = %addr, "management listens on {addr}, loopback only (--management-host to open it)");
    } else {
        tracing::warn!(management = %addr, "management listens on {addr}, reachable from other hosts");
    }
}

/// How long a broker that shuts down waits for the replicas it hands its partitions' lead to.
const HAND_OVER_LIMIT: Duration = Duration::from_secs(2);

/// How long the partitions may take to stop on shutdown.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(10);

/// Accepts gRPC connections until `stop` turns true, each served on a task of its own until its
/// client closes it or, once stopping, until its calls in progress end. Nagle's algorithm is off:
/// pushed jobs and answers are small writes that must not wait for the client's delayed ACK (up
/// to 40 ms per message otherwise). Each connection is a [`waggle_gateway::CoalescingIo`], which
/// writes the answers ready together at once. With `tls`, each connection's TLS handshake runs on
/// its own task (at most [`security::tls::HANDSHAKE_LIMIT`]) and a plaintext client is closed.
async fn serve_grpc(
    listener: tokio::net::TcpListener,
    server: GrpcServer,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    let mut stopping = std::pin::pin!(stopped(stop.clone()));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (conn, _) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        // out of file descriptors, say: wait for some to close instead of spinning
                        tracing::warn!(error = %e, "accepting a gRPC connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(e) = conn.set_nodelay(true) {
                    tracing::warn!(error = %e, "TCP_NODELAY on a gRPC connection failed");
                }
                let stopped = stopped(stop.clone());
                let io = waggle_gateway::CoalescingIo::new(conn);
                match &tls {
                    None => {
                        connections.spawn(server.clone().serve_connection(io, stopped));
                    }
                    Some(tls) => {
                        let (tls, server) = (tls.clone(), server.clone());
                        connections.spawn(async move {
                            match tokio::time::timeout(security::tls::HANDSHAKE_LIMIT, tls.accept(io)).await {
                                Ok(Ok(stream)) => server.serve_connection(stream, stopped).await,
                                Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake on the gRPC port failed"),
                                Err(_) => tracing::debug!("TLS handshake on the gRPC port timed out"),
                            }
                        });
                    }
                }
            }
            () = &mut stopping => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    while connections.join_next().await.is_some() {}
}

/// Resolves once `stop` is true (or its sender is gone).
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
}
