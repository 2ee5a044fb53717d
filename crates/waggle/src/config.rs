//! Configuration: defaults, then a TOML file, then `WAGGLE_*` environment variables, then flags
//! (each later source wins).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use waggle_broker::cluster::ClusterSpecError;
use waggle_broker::disk::DiskConfig;
use waggle_broker::{BackpressureConfig, ClusterSpec, EngineLimits, ParseLimits};
pub use waggle_exporter::debug::Target as DebugTarget;

use crate::security::network::{NetworkFile, NetworkSecurityArgs, NETWORK_SECURITY_ENV};
use crate::security::{SecurityArgs, SecurityConfig, SecurityFile};
use waggle_replication::tls::MutualTlsFiles;

/// Zeebe's internal (broker-to-broker) port.
pub const DEFAULT_INTERNAL_PORT: u16 = 26502;

/// Settings of a node (standalone or broker). Every flag also reads `WAGGLE_<NAME>` from the
/// environment.
#[derive(Debug, Clone, Args, Default)]
pub struct NodeArgs {
    /// Configuration file (TOML) with any of the keys below in snake_case, e.g. `partitions = 2`.
    #[arg(long, env = "WAGGLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Folder for partition logs, state and snapshots [default: ./data].
    #[arg(long, env = "WAGGLE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Number of partitions: of this node (standalone), of the whole cluster (`waggle broker`)
    /// [default: 1].
    #[arg(long, env = "WAGGLE_PARTITIONS")]
    pub partitions: Option<u16>,
    /// Address the gRPC gateway listens on [default: 127.0.0.1].
    #[arg(long, env = "WAGGLE_HOST")]
    pub host: Option<String>,
    /// Port of the gRPC gateway (Zeebe's) [default: 26500].
    #[arg(long, env = "WAGGLE_PORT")]
    pub port: Option<u16>,
    /// Port of the management HTTP server: /health, /ready, /metrics, /v1/incidents [default: 9600].
    #[arg(long, env = "WAGGLE_MANAGEMENT_PORT")]
    pub management_port: Option<u16>,
    /// Address the management HTTP server listens on, apart from --host: loopback only unless
    /// set otherwise [default: 127.0.0.1].
    #[arg(long, env = "WAGGLE_MANAGEMENT_HOST")]
    pub management_host: Option<String>,
    /// Largest accepted gRPC request in bytes [default: 4194304].
    #[arg(long, env = "WAGGLE_MAX_MESSAGE_SIZE")]
    pub max_message_size: Option<usize>,
    /// Default long-polling time of ActivateJobs in milliseconds [default: 10000].
    #[arg(long, env = "WAGGLE_LONG_POLLING_TIMEOUT_MS")]
    pub long_polling_timeout_ms: Option<u64>,
    /// Commands queued per partition before answering RESOURCE_EXHAUSTED [default: 4096].
    #[arg(long, env = "WAGGLE_QUEUE_CAPACITY")]
    pub queue_capacity: Option<usize>,
    /// Applied log entries between two snapshots (the log is compacted behind each) [default: 10000].
    #[arg(long, env = "WAGGLE_SNAPSHOT_EVERY_ENTRIES")]
    pub snapshot_every_entries: Option<u64>,
    /// Back pressure: refuse client commands (RESOURCE_EXHAUSTED) beyond an adaptive limit on those
    /// a partition has in flight (AIMD, after Zeebe's; job completions, failures and activations,
    /// cancellations and deployments are always taken) [default: true].
    #[arg(long, env = "WAGGLE_BACKPRESSURE", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub backpressure: Option<bool>,
    /// Back pressure: the limit a partition starts with [default: 2048].
    #[arg(long, env = "WAGGLE_BACKPRESSURE_INITIAL_LIMIT")]
    pub backpressure_initial_limit: Option<usize>,
    /// Back pressure: the highest limit [default: 4096].
    #[arg(long, env = "WAGGLE_BACKPRESSURE_MAX_LIMIT")]
    pub backpressure_max_limit: Option<usize>,
    /// Back pressure: an answer slower than this many milliseconds lowers the limit [default: 200].
    #[arg(long, env = "WAGGLE_BACKPRESSURE_REQUEST_TIMEOUT_MS")]
    pub backpressure_request_timeout_ms: Option<u64>,
    /// Limit: deepest nesting of XML elements in a deployed BPMN resource (`definitions` is 1,
    /// each subprocess one more); a deeper resource is rejected [default: 100, at most 1000].
    #[arg(long, env = "WAGGLE_MAX_BPMN_ELEMENT_DEPTH")]
    pub max_bpmn_element_depth: Option<usize>,
    /// Limit: most top-level variables in one variables document of a command (creation, job
    /// completion, SetVariables, message, signal); more are rejected [default: 250000].
    #[arg(long, env = "WAGGLE_MAX_DOCUMENT_VARIABLES")]
    pub max_document_variables: Option<usize>,
    /// Limit: most bytes of process records one deployment writes (each new process's record
    /// carries its whole resource: resource size × processes in it); more is rejected
    /// [default: 33554432].
    #[arg(long, env = "WAGGLE_MAX_DEPLOYMENT_PROCESS_BYTES")]
    pub max_deployment_process_bytes: Option<usize>,
    /// Limit: deepest nesting of process instances created by call activities (the root
    /// instance is 1); a call activity that would go deeper raises an incident, as Zeebe's
    /// `maxProcessDepth` [default: 1000, at least 1].
    #[arg(long, env = "WAGGLE_MAX_PROCESS_DEPTH")]
    pub max_process_depth: Option<usize>,
    /// The debug exporter: every committed record as a line of Zeebe's record JSON, appended to
    /// this file (`-`: standard output). In the TOML file: `[exporters.debug]` with `path = "..."`
    /// (no path: standard output) [default: off].
    #[arg(long, env = "WAGGLE_EXPORTERS_DEBUG_PATH", value_name = "PATH")]
    pub exporters_debug_path: Option<PathBuf>,
    /// An exporter with committed records to export that acknowledged nothing for this many
    /// milliseconds is reported stuck (`/health` DOWN, `waggle_exporter_stuck`) [default: 60000].
    #[arg(long, env = "WAGGLE_EXPORTER_STUCK_AFTER_MS")]
    pub exporter_stuck_after_ms: Option<u64>,
    /// Bounded export lag: while an exporter that works has more committed records than this
    /// unacknowledged (`waggle_exporter_unacknowledged_records`), a partition refuses new
    /// process instances with RESOURCE_EXHAUSTED (`waggle_export_backpressure_refused_total`);
    /// 0: never [default: 1000000, a few seconds of the query store's work].
    #[arg(long, env = "WAGGLE_EXPORTER_MAX_BACKLOG_RECORDS", value_name = "RECORDS")]
    pub exporter_max_backlog_records: Option<u64>,
    /// Deprecated (a bound in log entries, which let the export backlog grow to a minute of
    /// work and then stalled new instances): 0 still turns the bound off; any other value is
    /// ignored with a warning. Use --exporter-max-backlog-records.
    #[arg(long, env = "WAGGLE_EXPORTER_MAX_BACKLOG", value_name = "ENTRIES", hide = true)]
    pub exporter_max_backlog: Option<u64>,
    /// The query store, which the REST API's searches read: `true` or `false` for the embedded
    /// one (committed records exported into `query-store.sqlite` in the data folder), or a
    /// PostgreSQL database's URL, `postgres://user[:password]@host[:port]/database`, for
    /// production [default: true standalone, false for `waggle broker`].
    #[arg(long, env = "WAGGLE_QUERY_STORE", value_name = "BOOL|URL")]
    pub query_store: Option<QueryStore>,
    /// History clean-up: finished process instances older than this many seconds are deleted
    /// from the query store (0: kept forever) [default: 2592000, 30 days].
    #[arg(long, env = "WAGGLE_QUERY_STORE_HISTORY_TTL_SECS")]
    pub query_store_history_ttl_secs: Option<u64>,
    /// Port of the REST API v2 (Camunda 8.8's Orchestration Cluster API, under /v2) [default: 8080].
    #[arg(long, env = "WAGGLE_REST_PORT")]
    pub rest_port: Option<u16>,
    /// Largest REST API request body in bytes; a larger one is answered 413 (a deployment's
    /// multipart body stops at 4 MB in any case) [default: 4194304].
    #[arg(long, env = "WAGGLE_REST_MAX_BODY_SIZE")]
    pub rest_max_body_size: Option<usize>,
    #[command(flatten)]
    pub security: SecurityArgs,
    /// Disk watermarks: watch the data folder's free space (Zeebe's `data.disk.enableMonitoring`)
    /// [default: true].
    #[arg(long, env = "WAGGLE_DISK_MONITORING", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub disk_monitoring: Option<bool>,
    /// Disk watermarks: with less free space than this, commands that add work (creations,
    /// messages, deployments, ...) are refused with RESOURCE_EXHAUSTED; bytes, or with a unit:
    /// KB, MB, GB (Zeebe's `data.disk.freeSpace.processing`) [default: 2GB].
    #[arg(long, env = "WAGGLE_DISK_FREE_SPACE_PROCESSING", value_name = "SIZE")]
    pub disk_free_space_processing: Option<ByteSize>,
    /// Disk watermarks: with less free space than this, every client command is refused (job
    /// completions and cancellations too); at most the processing watermark (Zeebe's
    /// `data.disk.freeSpace.replication`) [default: 1GB].
    #[arg(long, env = "WAGGLE_DISK_FREE_SPACE_REPLICATION", value_name = "SIZE")]
    pub disk_free_space_replication: Option<ByteSize>,
    /// Disk watermarks: milliseconds between two readings of the free space [default: 1000].
    #[arg(long, env = "WAGGLE_DISK_MONITORING_INTERVAL_MS")]
    pub disk_monitoring_interval_ms: Option<u64>,
    /// Backups: the directory of the backup store (`POST /actuator/backups`, `waggle restore`);
    /// the same on every broker of a cluster [default: none, backups refused].
    #[arg(long, env = "WAGGLE_BACKUP_STORE", value_name = "DIR")]
    pub backup_store: Option<PathBuf>,
    /// Multi-tenancy (Zeebe 8.5's `multiTenancy.enabled`): requests name their tenant, and
    /// processes, instances, jobs, messages, signals and decisions belong to one; off, a tenant
    /// other than `<default>` is refused (docs/security.md, "Multi-tenancy") [default: false].
    #[arg(long, env = "WAGGLE_MULTI_TENANCY", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub multi_tenancy: Option<bool>,
    /// Backups in an S3-compatible bucket instead of a directory: the bucket's name (Zeebe's
    /// `data.backup.s3.bucketName`) [default: none].
    #[arg(long, env = "WAGGLE_BACKUP_S3_BUCKET", value_name = "NAME")]
    pub backup_s3_bucket: Option<String>,
    /// The S3 backup store's URL, e.g. `http://127.0.0.1:8333` (`s3.endpoint`) [default: AWS's].
    #[arg(long, env = "WAGGLE_BACKUP_S3_ENDPOINT", value_name = "URL")]
    pub backup_s3_endpoint: Option<String>,
    /// The S3 backup store's region (`s3.region`) [default: `AWS_REGION`, else us-east-1].
    #[arg(long, env = "WAGGLE_BACKUP_S3_REGION")]
    pub backup_s3_region: Option<String>,
    /// The S3 backup store's access key (`s3.accessKey`) [default: `AWS_ACCESS_KEY_ID`].
    #[arg(long, env = "WAGGLE_BACKUP_S3_ACCESS_KEY", hide_env_values = true)]
    pub backup_s3_access_key: Option<String>,
    /// The S3 backup store's secret key (`s3.secretKey`) [default: `AWS_SECRET_ACCESS_KEY`].
    #[arg(long, env = "WAGGLE_BACKUP_S3_SECRET_KEY", hide_env_values = true)]
    pub backup_s3_secret_key: Option<String>,
    /// A folder in the bucket the backups go under (`s3.basePath`) [default: the bucket's root].
    #[arg(long, env = "WAGGLE_BACKUP_S3_BASE_PATH", value_name = "PATH")]
    pub backup_s3_base_path: Option<String>,
}

/// A size in bytes: a number, or a number with a unit KB, MB or GB (powers of 1024, as
/// Zeebe's sizes), e.g. `512MB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ByteSizeText")]
pub struct ByteSize(pub u64);

/// `ByteSize` in the TOML file: an integer or a string with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum ByteSizeText {
    Bytes(u64),
    Text(String),
}

impl TryFrom<ByteSizeText> for ByteSize {
    type Error = String;

    fn try_from(v: ByteSizeText) -> Result<Self, String> {
        match v {
            ByteSizeText::Bytes(b) => Ok(ByteSize(b)),
            ByteSizeText::Text(t) => t.parse(),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let upper = t.to_ascii_uppercase();
        let (number, unit) = match upper.find(|c: char| !c.is_ascii_digit()) {
            Some(i) => upper.split_at(i),
            None => (upper.as_str(), ""),
        };
        let unit = match unit.trim() {
            "" | "B" => 1u64,
            "KB" => 1 << 10,
            "MB" => 1 << 20,
            "GB" => 1 << 30,
            other => return Err(format!("'{s}': unknown unit '{other}' (use KB, MB or GB)")),
        };
        let n: u64 = number.parse().map_err(|_| format!("'{s}' is not a size (e.g. 512MB)"))?;
        n.checked_mul(unit).map(ByteSize).ok_or_else(|| format!("'{s}' is too large"))
    }
}

/// A cluster broker's settings beside the node's (`waggle broker`).
#[derive(Debug, Clone, Args, Default)]
pub struct ClusterArgs {
    /// This broker's id: 0 to --cluster-size - 1 (Zeebe's nodeId) [default: 0]. A broker added
    /// to a running cluster later (Zeebe's scale-up) takes the next ids, 3, 4, ... of a cluster
    /// started with 3, with the same --cluster-size and --contact-points (the initial brokers')
    /// and an --internal-host/--internal-port of its own; it holds nothing until `POST
    /// /actuator/cluster/brokers` gives it replicas.
    #[arg(long, env = "WAGGLE_NODE_ID")]
    pub node_id: Option<u64>,
    /// Number of brokers in the cluster [default: the number of --contact-points, else 1].
    #[arg(long, env = "WAGGLE_CLUSTER_SIZE")]
    pub cluster_size: Option<u32>,
    /// How many brokers hold each partition (Zeebe's replicationFactor), 1 to --cluster-size
    /// [default: 1].
    #[arg(long, env = "WAGGLE_REPLICATION_FACTOR")]
    pub replication_factor: Option<u32>,
    /// Every broker's internal address (host:port), comma-separated, in node-id order: entry i is
    /// node i's, this broker's own included (its port must be --internal-port). The same list on
    /// every broker, also on one added later beyond --cluster-size (brokers learn each other's
    /// addresses from the gossip too). Not needed for a one-broker cluster.
    #[arg(long, env = "WAGGLE_CONTACT_POINTS", value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub contact_points: Option<Vec<String>>,
    /// Port of this broker's internal (broker-to-broker) server (Zeebe's) [default: 26502].
    #[arg(long, env = "WAGGLE_INTERNAL_PORT")]
    pub internal_port: Option<u16>,
    /// Address of this broker's internal server, the one the others reach it at [default: the
    /// host of its own entry in --contact-points, else 127.0.0.1].
    #[arg(long, env = "WAGGLE_INTERNAL_HOST")]
    pub internal_host: Option<String>,
    #[command(flatten)]
    pub network_security: NetworkSecurityArgs,
}

/// `waggle broker`: a node's settings and its place in the cluster.
#[derive(Debug, Clone, Args, Default)]
pub struct BrokerArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// `contact_points` in the TOML file: a list, or one comma-separated string as on the command line.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum ContactPoints {
    List(Vec<String>),
    Joined(String),
}

impl ContactPoints {
    pub(crate) fn into_vec(self) -> Vec<String> {
        match self {
            ContactPoints::List(v) => v,
            ContactPoints::Joined(s) => s.split(',').map(|p| p.trim().to_string()).collect(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    node_id: Option<u64>,
    cluster_size: Option<u32>,
    replication_factor: Option<u32>,
    contact_points: Option<ContactPoints>,
    internal_port: Option<u16>,
    internal_host: Option<String>,
    network: Option<NetworkFile>,
    data_dir: Option<PathBuf>,
    partitions: Option<u16>,
    host: Option<String>,
    port: Option<u16>,
    management_port: Option<u16>,
    management_host: Option<String>,
    max_message_size: Option<usize>,
    long_polling_timeout_ms: Option<u64>,
    queue_capacity: Option<usize>,
    snapshot_every_entries: Option<u64>,
    backpressure: Option<bool>,
    backpressure_initial_limit: Option<usize>,
    backpressure_max_limit: Option<usize>,
    backpressure_request_timeout_ms: Option<u64>,
    max_bpmn_element_depth: Option<usize>,
    max_document_variables: Option<usize>,
    max_deployment_process_bytes: Option<usize>,
    max_process_depth: Option<usize>,
    exporters: Option<ExportersFile>,
    exporter_stuck_after_ms: Option<u64>,
    exporter_max_backlog_records: Option<u64>,
    /// Deprecated: see the command line's.
    exporter_max_backlog: Option<u64>,
    query_store: Option<QueryStore>,
    query_store_history_ttl_secs: Option<u64>,
    rest_port: Option<u16>,
    rest_max_body_size: Option<usize>,
    security: Option<SecurityFile>,
    disk_monitoring: Option<bool>,
    disk_free_space_processing: Option<ByteSize>,
    disk_free_space_replication: Option<ByteSize>,
    disk_monitoring_interval_ms: Option<u64>,
    backup_store: Option<PathBuf>,
    multi_tenancy: Option<bool>,
    backup_s3_bucket: Option<String>,
    backup_s3_endpoint: Option<String>,
    backup_s3_region: Option<String>,
    backup_s3_access_key: Option<String>,
    backup_s3_secret_key: Option<String>,
    backup_s3_base_path: Option<String>,
}

/// `--query-store` (`query_store` in the file: a boolean or a URL string).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum QueryStore {
    /// The embedded SQLite store on or off.
    Embedded(bool),
    /// A PostgreSQL database's URL.
    Postgres(String),
}

impl std::str::FromStr for QueryStore {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "true" => Ok(QueryStore::Embedded(true)),
            "false" => Ok(QueryStore::Embedded(false)),
            url if waggle_store::Location::is_postgres_url(url) => Ok(QueryStore::Postgres(url.to_owned())),
            other => Err(format!("expected true, false or a postgres:// URL, not '{other}'")),
        }
    }
}

/// `[exporters.*]` tables of the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportersFile {
    debug: Option<DebugExporterFile>,
}

/// `[exporters.debug]`: present means on.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DebugExporterFile {
    /// The file the lines are appended to; none (or `-`): standard output.
    path: Option<PathBuf>,
}

/// The resolved configuration of a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub data_dir: PathBuf,
    pub partitions: u16,
    pub host: String,
    pub port: u16,
    pub management_port: u16,
    pub max_message_size: usize,
    pub long_polling_timeout_ms: u64,
    pub queue_capacity: usize,
    pub snapshot_every_entries: u64,
    pub backpressure: BackpressureConfig,
    pub limits: EngineLimits,
    /// Where the debug exporter writes, if it is on.
    pub debug_exporter: Option<DebugTarget>,
    pub exporter_stuck_after: Duration,
    /// See [`waggle_broker::export::ExportConfig::max_backlog_records`].
    pub exporter_max_backlog_records: u64,
    /// A value of the deprecated entries bound that was ignored (warned about at start).
    pub ignored_exporter_max_backlog: Option<u64>,
    /// The query store: embedded on or off, or PostgreSQL; `None`: the mode's default (the
    /// embedded one on standalone).
    pub query_store: Option<QueryStore>,
    /// History clean-up's time to live; `None`: kept forever.
    pub query_store_history_ttl: Option<Duration>,
    pub rest_port: u16,
    /// Where the management server listens (loopback by default).
    pub management_host: String,
    pub rest_max_body_size: usize,
    pub security: SecurityConfig,
    /// Disk watermarks.
    pub disk: DiskConfig,
    /// The backup store (a directory or an S3 bucket), if backups are on.
    pub backup_store: Option<waggle_broker::backup::StoreConfig>,
    /// Multi-tenancy on.
    pub multi_tenancy: bool,
    /// Mutual TLS between the brokers (`waggle broker` only), if on.
    pub internal_tls: Option<MutualTlsFiles>,
}

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// The environment variables of `waggle broker`'s settings, which the standalone node refuses.
const CLUSTER_ENV: [&str; 6] = [
    "WAGGLE_NODE_ID",
    "WAGGLE_CLUSTER_SIZE",
    "WAGGLE_REPLICATION_FACTOR",
    "WAGGLE_CONTACT_POINTS",
    "WAGGLE_INTERNAL_PORT",
    "WAGGLE_INTERNAL_HOST",
];

impl NodeArgs {
    fn file(&self) -> anyhow::Result<FileConfig> {
        match &self.config {
            Some(p) => read_file(p),
            None => Ok(FileConfig::default()),
        }
    }

    /// The standalone node's configuration. A cluster setting (in the file or the environment)
    /// is an error: it belongs to `waggle broker`.
    pub fn resolve(&self) -> anyhow::Result<NodeConfig> {
        let file = self.file()?;
        let in_file = [
            ("node_id", file.node_id.is_some()),
            ("cluster_size", file.cluster_size.is_some()),
            ("replication_factor", file.replication_factor.is_some()),
            ("contact_points", file.contact_points.is_some()),
            ("internal_port", file.internal_port.is_some()),
            ("internal_host", file.internal_host.is_some()),
            ("network", file.network.is_some()),
        ];
        if let Some((key, _)) = in_file.iter().find(|(_, set)| *set) {
            let path = self.config.as_deref().unwrap_or(Path::new("")).display();
            anyhow::bail!("the config file {path} sets {key}, a setting of a cluster broker: run `waggle broker --config {path}`, or remove it to run the standalone node");
        }
        if let Some(var) = CLUSTER_ENV.iter().chain(&NETWORK_SECURITY_ENV).find(|v| std::env::var_os(v).is_some()) {
            anyhow::bail!("{var} is set, a setting of a cluster broker: run `waggle broker`, or unset it to run the standalone node");
        }
        self.resolve_with(&file)
    }

    fn resolve_with(&self, file: &FileConfig) -> anyhow::Result<NodeConfig> {
        let config = NodeConfig {
            data_dir: self.data_dir.clone().or_else(|| file.data_dir.clone()).unwrap_or_else(|| PathBuf::from("data")),
            partitions: self.partitions.or(file.partitions).unwrap_or(1),
            host: self.host.clone().or_else(|| file.host.clone()).unwrap_or_else(|| "127.0.0.1".into()),
            port: self.port.or(file.port).unwrap_or(26500),
            management_port: self.management_port.or(file.management_port).unwrap_or(9600),
            max_message_size: self.max_message_size.or(file.max_message_size).unwrap_or(4 * 1024 * 1024),
            long_polling_timeout_ms: self.long_polling_timeout_ms.or(file.long_polling_timeout_ms).unwrap_or(10_000),
            queue_capacity: self.queue_capacity.or(file.queue_capacity).unwrap_or(4096),
            snapshot_every_entries: self.snapshot_every_entries.or(file.snapshot_every_entries).unwrap_or(10_000),
            backpressure: {
                let d = BackpressureConfig::default();
                BackpressureConfig {
                    enabled: self.backpressure.or(file.backpressure).unwrap_or(d.enabled),
                    initial_limit: self.backpressure_initial_limit.or(file.backpressure_initial_limit).unwrap_or(d.initial_limit),
                    max_limit: self.backpressure_max_limit.or(file.backpressure_max_limit).unwrap_or(d.max_limit),
                    request_timeout: self
                        .backpressure_request_timeout_ms
                        .or(file.backpressure_request_timeout_ms)
                        .map_or(d.request_timeout, Duration::from_millis),
                    ..d
                }
            },
            limits: {
                let d = EngineLimits::default();
                EngineLimits {
                    bpmn: ParseLimits {
                        max_element_depth: self.max_bpmn_element_depth.or(file.max_bpmn_element_depth).unwrap_or(d.bpmn.max_element_depth),
                    },
                    max_document_variables: self.max_document_variables.or(file.max_document_variables).unwrap_or(d.max_document_variables),
                    max_deployment_process_bytes: self
                        .max_deployment_process_bytes
                        .or(file.max_deployment_process_bytes)
                        .unwrap_or(d.max_deployment_process_bytes),
                    max_process_depth: self.max_process_depth.or(file.max_process_depth).unwrap_or(d.max_process_depth),
                }
            },
            debug_exporter: match (&self.exporters_debug_path, file.exporters.as_ref().and_then(|e| e.debug.as_ref())) {
                (Some(path), _) => Some(debug_target(Some(path))),
                (None, Some(table)) => Some(debug_target(table.path.as_ref())),
                (None, None) => None,
            },
            exporter_stuck_after: Duration::from_millis(self.exporter_stuck_after_ms.or(file.exporter_stuck_after_ms).unwrap_or(60_000)),
            exporter_max_backlog_records: self.exporter_max_backlog_records.or(file.exporter_max_backlog_records).unwrap_or(
                match self.exporter_max_backlog.or(file.exporter_max_backlog) {
                    Some(0) => 0,
                    _ => waggle_broker::export::DEFAULT_MAX_BACKLOG_RECORDS,
                },
            ),
            ignored_exporter_max_backlog: self.exporter_max_backlog.or(file.exporter_max_backlog).filter(|&n| n > 0),
            query_store: match self.query_store.clone().or_else(|| file.query_store.clone()) {
                Some(QueryStore::Postgres(url)) => Some(url.parse().map_err(|e: String| anyhow::anyhow!("query_store: {e}"))?),
                other => other,
            },
            query_store_history_ttl: Some(
                self.query_store_history_ttl_secs.or(file.query_store_history_ttl_secs).unwrap_or(30 * 24 * 3600),
            )
            .filter(|&s| s > 0)
            .map(Duration::from_secs),
            rest_port: self.rest_port.or(file.rest_port).unwrap_or(8080),
            management_host: self.management_host.clone().or_else(|| file.management_host.clone()).unwrap_or_else(|| "127.0.0.1".into()),
            rest_max_body_size: self.rest_max_body_size.or(file.rest_max_body_size).unwrap_or(4 * 1024 * 1024),
            security: self.security.resolve(file.security.as_ref())?,
            disk: {
                let d = DiskConfig::default();
                DiskConfig {
                    enabled: self.disk_monitoring.or(file.disk_monitoring).unwrap_or(d.enabled),
                    free_space_processing: self
                        .disk_free_space_processing
                        .or(file.disk_free_space_processing)
                        .map_or(d.free_space_processing, |b| b.0),
                    free_space_replication: self
                        .disk_free_space_replication
                        .or(file.disk_free_space_replication)
                        .map_or(d.free_space_replication, |b| b.0),
                    monitoring_interval: self
                        .disk_monitoring_interval_ms
                        .or(file.disk_monitoring_interval_ms)
                        .map_or(d.monitoring_interval, Duration::from_millis),
                }
            },
            backup_store: self.backup_store_with(file)?,
            multi_tenancy: self.multi_tenancy.or(file.multi_tenancy).unwrap_or(false),
            internal_tls: None,
        };
        anyhow::ensure!(config.rest_max_body_size >= 1024, "--rest-max-body-size must be at least 1024 bytes");
        anyhow::ensure!(config.partitions >= 1, "--partitions must be at least 1");
        anyhow::ensure!(config.max_message_size >= 1024, "--max-message-size must be at least 1024 bytes");
        let b = &config.backpressure;
        anyhow::ensure!(b.max_limit >= 1, "--backpressure-max-limit must be at least 1");
        anyhow::ensure!(
            (1..=b.max_limit).contains(&b.initial_limit),
            "--backpressure-initial-limit must be between 1 and --backpressure-max-limit ({})",
            b.max_limit
        );
        anyhow::ensure!(!b.request_timeout.is_zero(), "--backpressure-request-timeout-ms must be at least 1");
        let ceiling = ParseLimits::MAX_ELEMENT_DEPTH_CEILING;
        anyhow::ensure!(
            (3..=ceiling).contains(&config.limits.bpmn.max_element_depth),
            "--max-bpmn-element-depth must be between 3 and {ceiling} (deeper nesting is refused to keep the parser and the engine within their stack)"
        );
        anyhow::ensure!(config.limits.max_process_depth >= 1, "--max-process-depth must be at least 1");
        anyhow::ensure!(
            config.disk.free_space_replication <= config.disk.free_space_processing,
            "--disk-free-space-replication ({} bytes) must be at most --disk-free-space-processing ({} bytes)",
            config.disk.free_space_replication,
            config.disk.free_space_processing
        );
        anyhow::ensure!(!config.disk.monitoring_interval.is_zero(), "--disk-monitoring-interval-ms must be at least 1");
        Ok(config)
    }
}

fn debug_target(path: Option<&PathBuf>) -> DebugTarget {
    match path {
        Some(p) if p.as_os_str() != "-" => DebugTarget::File(p.clone()),
        _ => DebugTarget::Stdout,
    }
}

impl NodeArgs {
    /// The backup store the flags, the environment and the file name: a directory, or an S3
    /// bucket (not both).
    fn backup_store_with(&self, file: &FileConfig) -> anyhow::Result<Option<waggle_broker::backup::StoreConfig>> {
        use waggle_broker::backup::{S3Config, StoreConfig};
        let dir = self.backup_store.clone().or_else(|| file.backup_store.clone());
        let pick = |flag: &Option<String>, key: &Option<String>| flag.clone().or_else(|| key.clone());
        let bucket = pick(&self.backup_s3_bucket, &file.backup_s3_bucket);
        match (dir, bucket) {
            (Some(_), Some(_)) => anyhow::bail!("--backup-store and --backup-s3-bucket name two backup stores: choose one"),
            (Some(dir), None) => Ok(Some(StoreConfig::Dir(dir))),
            (None, Some(bucket)) => Ok(Some(StoreConfig::S3(S3Config {
                bucket,
                endpoint: pick(&self.backup_s3_endpoint, &file.backup_s3_endpoint),
                region: pick(&self.backup_s3_region, &file.backup_s3_region),
                access_key: pick(&self.backup_s3_access_key, &file.backup_s3_access_key),
                secret_key: pick(&self.backup_s3_secret_key, &file.backup_s3_secret_key),
                base_path: pick(&self.backup_s3_base_path, &file.backup_s3_base_path),
            }))),
            (None, None) => Ok(None),
        }
    }
}

impl BrokerArgs {
    /// For `waggle restore`: the node's configuration, and its cluster if any cluster setting
    /// is given (flags, environment or file), else `None` (a standalone node's folder).
    pub fn resolve_restore(&self) -> anyhow::Result<(NodeConfig, Option<ClusterSpec>)> {
        let file = self.node.file()?;
        let node = self.node.resolve_with(&file)?;
        let c = &self.cluster;
        let clustered = c.node_id.or(file.node_id).is_some()
            || c.cluster_size.or(file.cluster_size).is_some()
            || c.contact_points.is_some()
            || file.contact_points.is_some();
        let cluster = if clustered { Some(self.cluster.resolve_with(&file)?) } else { None };
        let node = NodeConfig { internal_tls: self.cluster.network_security.resolve(file.network.as_ref())?, ..node };
        Ok((node, cluster))
    }

    /// The broker's node configuration and its cluster, validated.
    pub fn resolve(&self) -> anyhow::Result<(NodeConfig, ClusterSpec)> {
        let file = self.node.file()?;
        let node = self.node.resolve_with(&file)?;
        let cluster = self.cluster.resolve_with(&file)?;
        let node = NodeConfig { internal_tls: self.cluster.network_security.resolve(file.network.as_ref())?, ..node };
        Ok((node, cluster))
    }
}

impl ClusterArgs {
    fn resolve_with(&self, file: &FileConfig) -> anyhow::Result<ClusterSpec> {
        let node_id = self.node_id.or(file.node_id).unwrap_or(0);
        let internal_port = self.internal_port.or(file.internal_port).unwrap_or(DEFAULT_INTERNAL_PORT);
        let internal_host = self.internal_host.clone().or_else(|| file.internal_host.clone());
        let contact_points: Option<Vec<String>> = self
            .contact_points
            .clone()
            .or_else(|| file.contact_points.clone().map(ContactPoints::into_vec))
            .map(|v| v.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect());
        let cluster_size = self.cluster_size.or(file.cluster_size).unwrap_or(contact_points.as_ref().map_or(1, |c| c.len() as u32));
        anyhow::ensure!(cluster_size >= 1, "--cluster-size must be at least 1");
        let replication_factor = self.replication_factor.or(file.replication_factor).unwrap_or(1);
        // the node id and the replication factor first: their errors say more than an address's
        let placeholders = vec![SocketAddr::from(([0, 0, 0, 0], 0)); cluster_size as usize];
        // a node id beyond the cluster size: a broker added to a running cluster (checked below)
        let added = node_id >= u64::from(cluster_size);
        let placeholder = added.then_some(placeholders[0]);
        ClusterSpec { node_id, members: placeholders, replication_factor, own_address: placeholder }.validate().map_err(|e| match e {
            ClusterSpecError::NodeIdOutOfRange { node_id, size } => {
                anyhow::anyhow!("--node-id {node_id} must be below --cluster-size {size} (node ids are 0 to {})", size - 1)
            }
            ClusterSpecError::ReplicationFactor { factor, size } => {
                anyhow::anyhow!("--replication-factor {factor} must be between 1 and --cluster-size {size}")
            }
            ClusterSpecError::NoMembers => anyhow::anyhow!("--cluster-size must be at least 1"),
        })?;
        let members = match &contact_points {
            None if added => anyhow::bail!(
                "--node-id {node_id} must be below --cluster-size {cluster_size} (node ids are 0 to {}), or, for a broker added to a \
                 running cluster, come with --contact-points: the initial brokers' internal addresses (host:port), in node-id order",
                cluster_size - 1
            ),
            None if cluster_size == 1 => {
                let host = internal_host.as_deref().unwrap_or("127.0.0.1");
                vec![socket_address(host, internal_port).with_context(|| format!("--internal-host {host}"))?]
            }
            None => anyhow::bail!(
                "--cluster-size {cluster_size} needs --contact-points: the {cluster_size} brokers' internal addresses (host:port), \
                 comma-separated, in node-id order (entry i is node i's)"
            ),
            Some(points) => {
                anyhow::ensure!(
                    points.len() == cluster_size as usize,
                    "--contact-points lists {} address(es) but --cluster-size is {cluster_size}: list every broker's internal address \
                     (host:port), in node-id order (entry i is node i's)",
                    points.len()
                );
                let mut members = Vec::with_capacity(points.len());
                for (i, point) in points.iter().enumerate() {
                    let (host, port) = split_host_port(point)
                        .with_context(|| format!("--contact-points entry {i} ({point}) is not a host:port address"))?;
                    let address = socket_address(host, port).with_context(|| format!("--contact-points entry {i} ({point})"))?;
                    if let Some(j) = members.iter().position(|m| *m == address) {
                        anyhow::bail!(
                            "--contact-points entries {j} ({}) and {i} ({point}) are the same address: each broker needs its own",
                            points[j]
                        );
                    }
                    members.push(address);
                }
                members
            }
        };
        let own_address = if added {
            let host = internal_host.as_deref().unwrap_or("127.0.0.1");
            let own = socket_address(host, internal_port).with_context(|| format!("--internal-host {host}"))?;
            if let Some(entry) = members.iter().position(|m| *m == own) {
                anyhow::bail!(
                    "--node-id {node_id} must be below --cluster-size {cluster_size} (node ids are 0 to {}), or, for a broker added \
                     to a running cluster, have an internal address of its own: {own} (--internal-host, --internal-port) is \
                     --contact-points entry {entry}'s",
                    cluster_size - 1
                );
            }
            Some(own)
        } else {
            None
        };
        let spec = ClusterSpec { node_id, members, replication_factor, own_address };
        if let Some(points) = contact_points.as_ref().filter(|_| !added) {
            let own = &points[node_id as usize];
            let address = spec.members[node_id as usize];
            anyhow::ensure!(
                address.port() == internal_port,
                "--contact-points entry {node_id} ({own}) is this broker's own internal address (--node-id {node_id}), \
                 but --internal-port is {internal_port}: give this broker --internal-port {}, or correct the entry",
                address.port()
            );
            if let Some(host) = &internal_host {
                let bound = socket_address(host, internal_port).with_context(|| format!("--internal-host {host}"))?;
                anyhow::ensure!(
                    bound == address,
                    "--contact-points entry {node_id} ({own}) is this broker's own internal address (--node-id {node_id}), \
                     but --internal-host is {host}"
                );
            }
        }
        Ok(spec)
    }
}

/// `host:port` split at its last colon (`[::1]:26502` for IPv6).
pub(crate) fn split_host_port(point: &str) -> anyhow::Result<(&str, u16)> {
    let (host, port) = point.rsplit_once(':').context("no port")?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    anyhow::ensure!(!host.is_empty(), "no host");
    Ok((host, port.parse().with_context(|| format!("bad port '{port}'"))?))
}

/// The first address `host` resolves to, with `port`.
pub(crate) fn socket_address(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .with_context(|| format!("{host} has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_watermarks_read_sizes_with_units_and_keep_replication_below_processing() {
        assert_eq!("512MB".parse::<ByteSize>(), Ok(ByteSize(512 << 20)));
        assert_eq!("2gb".parse::<ByteSize>(), Ok(ByteSize(2 << 30)));
        assert_eq!("1000".parse::<ByteSize>(), Ok(ByteSize(1000)));
        assert!("12XB".parse::<ByteSize>().is_err());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "disk_free_space_processing = \"300MB\"\ndisk_free_space_replication = 1048576\n").unwrap();
        let c = NodeArgs { config: Some(file.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.disk.free_space_processing, c.disk.free_space_replication), (300 << 20, 1 << 20));
        assert!(c.disk.enabled);
        let bad = NodeArgs { config: Some(file), disk_free_space_replication: Some(ByteSize(1 << 30)), ..Default::default() };
        assert!(bad.resolve().unwrap_err().to_string().contains("--disk-free-space-replication"));
    }

    #[test]
    fn the_s3_backup_store_reads_zeebes_settings_from_the_file_and_flags() {
        use waggle_broker::backup::{S3Config, StoreConfig};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(
            &file,
            "backup_s3_bucket = \"b\"\nbackup_s3_endpoint = \"http://127.0.0.1:9000\"\nbackup_s3_region = \"eu-west-1\"\n\
             backup_s3_access_key = \"k\"\nbackup_s3_secret_key = \"s\"\nbackup_s3_base_path = \"cluster-a\"\n",
        )
        .unwrap();
        let args = NodeArgs { config: Some(file.clone()), backup_s3_base_path: Some("cluster-b".into()), ..Default::default() };
        let expected = S3Config {
            bucket: "b".into(),
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("eu-west-1".into()),
            access_key: Some("k".into()),
            secret_key: Some("s".into()),
            base_path: Some("cluster-b".into()),
        };
        assert_eq!(args.resolve().unwrap().backup_store, Some(StoreConfig::S3(expected)));
        let both = NodeArgs { config: Some(file), backup_store: Some("/backups".into()), ..Default::default() };
        assert!(both.resolve().unwrap_err().to_string().contains("choose one"));
    }

    #[test]
    fn the_export_backlog_is_bounded_in_records_and_the_entries_bound_is_deprecated() {
        use waggle_broker::export::DEFAULT_MAX_BACKLOG_RECORDS;
        let c = NodeArgs::default().resolve().unwrap();
        assert_eq!((c.exporter_max_backlog_records, c.ignored_exporter_max_backlog), (DEFAULT_MAX_BACKLOG_RECORDS, None));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "exporter_max_backlog_records = 250000\n").unwrap();
        let c = NodeArgs { config: Some(file.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!(c.exporter_max_backlog_records, 250_000);
        let c = NodeArgs { config: Some(file), exporter_max_backlog_records: Some(7), ..Default::default() }.resolve().unwrap();
        assert_eq!(c.exporter_max_backlog_records, 7);
        // the old bound in entries: 0 still turns it off; another value is ignored (warned about)
        let c = NodeArgs { exporter_max_backlog: Some(0), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.exporter_max_backlog_records, c.ignored_exporter_max_backlog), (0, None));
        let c = NodeArgs { exporter_max_backlog: Some(10_000), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.exporter_max_backlog_records, c.ignored_exporter_max_backlog), (DEFAULT_MAX_BACKLOG_RECORDS, Some(10_000)));
    }

    #[test]
    fn flags_override_the_file_and_defaults_fill_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "partitions = 3\nport = 1234\n").unwrap();
        let args = NodeArgs { config: Some(file), port: Some(5555), ..Default::default() };
        let c = args.resolve().unwrap();
        assert_eq!(c.partitions, 3);
        assert_eq!(c.port, 5555);
        assert_eq!(c.management_port, 9600);
    }

    #[test]
    fn security_from_the_file_and_management_on_loopback_by_default() {
        let c = NodeArgs { host: Some("0.0.0.0".into()), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.host.as_str(), c.management_host.as_str()), ("0.0.0.0", "127.0.0.1"));
        assert_eq!((c.security.tls, c.security.basic_auth, c.rest_max_body_size), (None, None, 4 * 1024 * 1024));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(
            &file,
            "management_host = \"0.0.0.0\"\nrest_max_body_size = 2048\n[security]\nenabled = true\n\
             certificate_chain_path = \"c.pem\"\nprivate_key_path = \"k.pem\"\n\
             [security.authentication]\nmethod = \"basic\"\n[[security.initialization.users]]\nusername = \"demo\"\npassword = \"demo\"\n",
        )
        .unwrap();
        let c = NodeArgs { config: Some(file), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.management_host.as_str(), c.rest_max_body_size), ("0.0.0.0", 2048));
        assert_eq!(c.security.tls.map(|t| t.private_key_path), Some(PathBuf::from("k.pem")));
        assert_eq!(c.security.basic_auth.map(|u| u.count()), Some(1));
    }

    #[test]
    fn the_debug_exporter_from_the_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(NodeArgs::default().resolve().unwrap().debug_exporter, None, "off by default");
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "exporter_stuck_after_ms = 500\n[exporters.debug]\npath = \"/tmp/r.jsonl\"\n").unwrap();
        let c = NodeArgs { config: Some(file.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!(c.debug_exporter, Some(DebugTarget::File("/tmp/r.jsonl".into())));
        assert_eq!(c.exporter_stuck_after, Duration::from_millis(500));
        let flag = NodeArgs { config: Some(file.clone()), exporters_debug_path: Some("-".into()), ..Default::default() };
        assert_eq!(flag.resolve().unwrap().debug_exporter, Some(DebugTarget::Stdout));
        std::fs::write(&file, "[exporters.debug]\n").unwrap();
        let c = NodeArgs { config: Some(file.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!(c.debug_exporter, Some(DebugTarget::Stdout), "a table without a path: standard output");
        std::fs::write(&file, "[exporters.kafka]\n").unwrap();
        let err = NodeArgs { config: Some(file), ..Default::default() }.resolve().unwrap_err();
        assert!(format!("{err:#}").contains("kafka"), "{err:#}");
    }

    #[test]
    fn the_query_store_and_the_rest_port_from_the_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let c = NodeArgs::default().resolve().unwrap();
        assert_eq!((c.query_store, c.rest_port), (None, 8080), "the mode decides; port 8080");
        assert_eq!(c.query_store_history_ttl, Some(Duration::from_secs(30 * 24 * 3600)));
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "query_store = false\nquery_store_history_ttl_secs = 0\nrest_port = 8181\n").unwrap();
        let c = NodeArgs { config: Some(file.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.query_store, c.query_store_history_ttl, c.rest_port), (Some(QueryStore::Embedded(false)), None, 8181));
        let flags = NodeArgs {
            config: Some(file.clone()),
            query_store: Some(QueryStore::Embedded(true)),
            rest_port: Some(9090),
            ..Default::default()
        };
        let c = flags.resolve().unwrap();
        assert_eq!((c.query_store, c.rest_port), (Some(QueryStore::Embedded(true)), 9090), "flags over the file");
        // PostgreSQL: a URL, in the file or as the flag
        std::fs::write(&file, "query_store = \"postgres://w@db:5432/waggle\"\n").unwrap();
        let c = NodeArgs { config: Some(file.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!(c.query_store, Some(QueryStore::Postgres("postgres://w@db:5432/waggle".into())));
        assert_eq!("postgresql://h/d".parse(), Ok(QueryStore::Postgres("postgresql://h/d".into())));
        assert_eq!("false".parse(), Ok(QueryStore::Embedded(false)));
        assert!("mysql://h/d".parse::<QueryStore>().is_err());
        std::fs::write(&file, "query_store = \"yes\"\n").unwrap();
        let err = NodeArgs { config: Some(file), ..Default::default() }.resolve().unwrap_err();
        assert!(format!("{err:#}").contains("postgres://"), "{err:#}");
    }

    #[test]
    fn unknown_keys_in_the_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "partitons = 3\n").unwrap();
        let err = NodeArgs { config: Some(file), ..Default::default() }.resolve().unwrap_err();
        assert!(format!("{err:#}").contains("partitons"), "{err:#}");
    }

    #[test]
    fn backpressure_settings_from_file_and_flags_and_their_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "backpressure = false\nbackpressure_max_limit = 50\nbackpressure_request_timeout_ms = 80\n").unwrap();
        let args = NodeArgs { config: Some(file.clone()), backpressure_initial_limit: Some(10), ..Default::default() };
        let b = args.resolve().unwrap().backpressure;
        assert_eq!((b.enabled, b.initial_limit, b.max_limit, b.request_timeout), (false, 10, 50, Duration::from_millis(80)));
        assert_eq!(NodeArgs::default().resolve().unwrap().backpressure, BackpressureConfig::default());
        let err = NodeArgs { config: Some(file), backpressure_initial_limit: Some(51), ..Default::default() }.resolve().unwrap_err();
        assert!(err.to_string().contains("--backpressure-initial-limit must be between 1 and --backpressure-max-limit (50)"), "{err}");
        let err = NodeArgs { backpressure_request_timeout_ms: Some(0), ..Default::default() }.resolve().unwrap_err();
        assert!(err.to_string().contains("--backpressure-request-timeout-ms"), "{err}");
    }

    #[test]
    fn limits_from_file_and_flags_and_their_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "max_bpmn_element_depth = 40\n").unwrap();
        let from_file = NodeArgs { config: Some(file.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!(from_file.limits.bpmn.max_element_depth, 40);
        let from_flag =
            NodeArgs { config: Some(file), max_bpmn_element_depth: Some(60), max_document_variables: Some(7), ..Default::default() }
                .resolve()
                .unwrap();
        assert_eq!((from_flag.limits.bpmn.max_element_depth, from_flag.limits.max_document_variables), (60, 7));
        assert_eq!(NodeArgs::default().resolve().unwrap().limits, EngineLimits::default());
        let err = NodeArgs { max_bpmn_element_depth: Some(1_001), ..Default::default() }.resolve().unwrap_err();
        assert!(err.to_string().contains("--max-bpmn-element-depth must be between 3 and 1000"), "{err}");
        let depth = NodeArgs { max_process_depth: Some(12), ..Default::default() }.resolve().unwrap();
        assert_eq!(depth.limits.max_process_depth, 12);
        let err = NodeArgs { max_process_depth: Some(0), ..Default::default() }.resolve().unwrap_err();
        assert!(err.to_string().contains("--max-process-depth must be at least 1"), "{err}");
    }

    fn broker(cluster: ClusterArgs) -> anyhow::Result<ClusterSpec> {
        BrokerArgs { node: NodeArgs::default(), cluster }.resolve().map(|(_, spec)| spec)
    }

    fn loopback(ports: &[u16]) -> Vec<SocketAddr> {
        ports.iter().map(|p| SocketAddr::from(([127, 0, 0, 1], *p))).collect()
    }

    #[test]
    fn a_broker_alone_is_a_one_broker_cluster_on_the_internal_port() {
        let spec = broker(ClusterArgs::default()).unwrap();
        assert_eq!(spec, ClusterSpec { node_id: 0, members: loopback(&[26502]), replication_factor: 1, own_address: None });
        let spec =
            broker(ClusterArgs { internal_port: Some(3000), internal_host: Some("127.0.0.2".into()), ..Default::default() }).unwrap();
        assert_eq!(spec.members, vec![SocketAddr::from(([127, 0, 0, 2], 3000))]);
    }

    #[test]
    fn cluster_settings_from_the_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(
            &file,
            "partitions = 6\nnode_id = 1\nreplication_factor = 3\ninternal_port = 26512\n\
             contact_points = [\"127.0.0.1:26502\", \"127.0.0.1:26512\", \"127.0.0.1:26522\"]\n",
        )
        .unwrap();
        let args = BrokerArgs { node: NodeArgs { config: Some(file.clone()), ..Default::default() }, cluster: ClusterArgs::default() };
        let (node, spec) = args.resolve().unwrap();
        assert_eq!(node.partitions, 6);
        assert_eq!(spec, ClusterSpec { node_id: 1, members: loopback(&[26502, 26512, 26522]), replication_factor: 3, own_address: None });
        // a flag wins over the file; the contact points as one comma-separated string
        std::fs::write(&file, "cluster_size = 2\ncontact_points = \"127.0.0.1:26502, 127.0.0.1:26512\"\n").unwrap();
        let cluster = ClusterArgs { node_id: Some(1), internal_port: Some(26512), ..Default::default() };
        let (_, spec) = BrokerArgs { node: NodeArgs { config: Some(file), ..Default::default() }, cluster }.resolve().unwrap();
        assert_eq!(spec, ClusterSpec { node_id: 1, members: loopback(&[26502, 26512]), replication_factor: 1, own_address: None });
    }

    #[test]
    fn a_broker_added_later_takes_the_next_id_with_the_initial_contact_points_and_an_address_of_its_own() {
        // Zeebe's scale-up: brokers 3 and 4 of a cluster started with 3, the same flags but
        // their node id and internal port
        let points = Some(vec!["127.0.0.1:26502".to_string(), "127.0.0.1:26512".into(), "127.0.0.1:26522".into()]);
        let args = ClusterArgs { node_id: Some(4), contact_points: points.clone(), internal_port: Some(26542), ..Default::default() };
        let spec = broker(args).unwrap();
        let own = SocketAddr::from(([127, 0, 0, 1], 26542));
        assert_eq!(
            spec,
            ClusterSpec { node_id: 4, members: loopback(&[26502, 26512, 26522]), replication_factor: 1, own_address: Some(own) }
        );
        assert_eq!((spec.address(), spec.cluster_size()), (own, 3));
        // its address must be its own, and it needs the contact points
        let err = broker(ClusterArgs { node_id: Some(3), contact_points: points, internal_port: Some(26512), ..Default::default() });
        let err = format!("{:#}", err.unwrap_err());
        assert!(err.contains("127.0.0.1:26512 (--internal-host, --internal-port) is --contact-points entry 1's"), "{err}");
        let err = format!("{:#}", broker(ClusterArgs { node_id: Some(3), internal_port: Some(26532), ..Default::default() }).unwrap_err());
        assert!(err.contains("for a broker added to a running cluster, come with --contact-points"), "{err}");
    }

    #[test]
    fn impossible_clusters_are_errors_naming_the_flags() {
        let points = |n: u16| Some((0..n).map(|i| format!("127.0.0.1:{}", 26502 + 10 * i)).collect::<Vec<_>>());
        let cases = [
            (ClusterArgs { node_id: Some(3), contact_points: points(3), ..Default::default() }, "--node-id 3 must be below --cluster-size 3"),
            (ClusterArgs { replication_factor: Some(4), contact_points: points(3), ..Default::default() }, "--replication-factor 4 must be between 1 and --cluster-size 3"),
            (ClusterArgs { replication_factor: Some(0), ..Default::default() }, "--replication-factor 0 must be between 1 and --cluster-size 1"),
            (ClusterArgs { cluster_size: Some(3), ..Default::default() }, "--cluster-size 3 needs --contact-points"),
            (ClusterArgs { cluster_size: Some(3), contact_points: points(2), ..Default::default() }, "--contact-points lists 2 address(es) but --cluster-size is 3"),
            (ClusterArgs { node_id: Some(1), contact_points: points(3), ..Default::default() }, "--contact-points entry 1 (127.0.0.1:26512) is this broker's own internal address (--node-id 1), but --internal-port is 26502: give this broker --internal-port 26512"),
            (ClusterArgs { contact_points: Some(vec!["127.0.0.1:26502".into(), "nowhere".into()]), ..Default::default() }, "--contact-points entry 1 (nowhere) is not a host:port address"),
            (ClusterArgs { contact_points: points(2), internal_host: Some("127.0.0.2".into()), ..Default::default() }, "but --internal-host is 127.0.0.2"),
            (ClusterArgs { contact_points: Some(vec!["127.0.0.1:26502".into(), "127.0.0.1:26502".into()]), ..Default::default() }, "--contact-points entries 0 (127.0.0.1:26502) and 1 (127.0.0.1:26502) are the same address"),
        ];
        for (args, expected) in cases {
            let err = format!("{:#}", broker(args.clone()).unwrap_err());
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }

    #[test]
    fn the_standalone_node_refuses_a_brokers_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("waggle.toml");
        std::fs::write(&file, "node_id = 1\n").unwrap();
        let err = NodeArgs { config: Some(file), ..Default::default() }.resolve().unwrap_err();
        assert!(err.to_string().contains("sets node_id, a setting of a cluster broker: run `waggle broker --config"), "{err}");
    }
}
