//! Configuration: defaults, then a TOML file, then `WAGGLE_*` environment variables, then flags
//! (each later source wins).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use waggle_broker::{BackpressureConfig, EngineLimits, ParseLimits};

/// Settings of a standalone node. Every flag also reads `WAGGLE_<NAME>` from the environment.
#[derive(Debug, Clone, Args, Default)]
pub struct NodeArgs {
    /// Configuration file (TOML) with any of the keys below in snake_case, e.g. `partitions = 2`.
    #[arg(long, env = "WAGGLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Folder for partition logs, state and snapshots [default: ./data].
    #[arg(long, env = "WAGGLE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Number of partitions on this node [default: 1].
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    partitions: Option<u16>,
    host: Option<String>,
    port: Option<u16>,
    management_port: Option<u16>,
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
}

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

impl NodeArgs {
    pub fn resolve(&self) -> anyhow::Result<NodeConfig> {
        let file = match &self.config {
            Some(p) => read_file(p)?,
            None => FileConfig::default(),
        };
        let config = NodeConfig {
            data_dir: self.data_dir.clone().or(file.data_dir).unwrap_or_else(|| PathBuf::from("data")),
            partitions: self.partitions.or(file.partitions).unwrap_or(1),
            host: self.host.clone().or(file.host).unwrap_or_else(|| "127.0.0.1".into()),
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
                }
            },
        };
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
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
