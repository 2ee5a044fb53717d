//! The benchmark workloads (W1..W6) and what the bench reads from a BPMN model.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

/// Models and payloads of `workloads/`, embedded so the binary stands alone.
pub const ONE_TASK: &str = include_str!("../../../workloads/one_task.bpmn");
pub const TEN_TASKS: &str = include_str!("../../../workloads/ten_tasks.bpmn");
pub const TIMER: &str = include_str!("../../../workloads/timer.bpmn");
pub const MESSAGE_ONE_TASK: &str = include_str!("../../../workloads/message_one_task.bpmn");
pub const MESSAGE_START_ONE_TASK: &str = include_str!("../../../workloads/message_start_one_task.bpmn");
pub const RULES: &str = include_str!("../../../workloads/rules.bpmn");
pub const RULES_DECISION: &str = include_str!("../../../workloads/rules.dmn");
pub const MULTI_INSTANCE: &str = include_str!("../../../workloads/multi_instance.bpmn");
pub const PAYLOAD_BIG: &str = include_str!("../../../workloads/payload_big.json");
pub const PAYLOAD_TYPICAL: &str = include_str!("../../../workloads/payload_typical.json");
pub const PAYLOAD_SMALL: &str = include_str!("../../../workloads/payload_small.json");

/// Instances a closed loop (`--rate max`) keeps created and not finished unless told otherwise:
/// enough that the bound is not what limits a server that answers every creation. W2 with 256
/// left a quarter of the 2 cores idle; 1,024 gave Waggle 15 % more, at p99 65–85 ms. A server
/// that refuses creations keeps its own, smaller window (see `window.rs`): Zeebe holds ~80.
pub const DEFAULT_OUTSTANDING: usize = 1024;

/// How the starter paces creations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Pace {
    /// A fixed rate in process instances per second (open loop: does not wait for completions).
    Rate(f64),
    /// As fast as the server holds: at most this many instances created and not yet completed
    /// (closed loop), creations retried after back pressure.
    Max { outstanding: usize },
}

/// One fully specified workload.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub name: String,
    pub description: String,
    #[serde(skip)]
    pub model: String,
    pub model_name: String,
    #[serde(skip)]
    pub payload: String,
    pub payload_bytes: usize,
    pub pace: Pace,
    pub job_type: String,
    #[serde(with = "ms")]
    pub worker_delay: Duration,
    pub worker_capacity: usize,
    /// Job push (StreamActivatedJobs) rather than polling (ActivateJobs).
    pub stream: bool,
    /// Measure instances with CreateProcessInstanceWithResult (needed when no job ends them).
    pub with_result: bool,
    /// Publish a message correlated to each instance right after its creation.
    pub publish_message: bool,
    /// Start each instance by publishing the model's message to its message start event instead
    /// of CreateProcessInstance.
    pub start_by_message: bool,
    /// Expected timer duration inside the model, to report timer lateness.
    #[serde(with = "opt_ms")]
    pub timer: Option<Duration>,
    /// Deployed with the model, in the same deployment: the DMN of its business rule task.
    #[serde(skip)]
    pub decision: Option<Decision>,
    /// One instance at a time, each long (W9): no warm-up, a 1 s window (the instances begun in
    /// it are measured), and at least 10 minutes to let them finish.
    pub one_at_a_time: bool,
}

/// A DMN resource deployed beside a workload's model; the peers have their own dialect of it
/// under the same name in `peers/models/<engine>/`.
#[derive(Debug, Clone)]
pub struct Decision {
    pub name: String,
    pub content: String,
}

mod ms {
    pub fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }
}

mod opt_ms {
    pub fn serialize<S: serde::Serializer>(d: &Option<std::time::Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_secs_f64() * 1000.0)),
            None => s.serialize_none(),
        }
    }
}

/// The named workloads. W6 runs W2 and reports the server's start-up time and memory; W2-25 is
/// W2 with 25 instances in flight instead of 1,024, the closed loop at which the peers
/// (Flowable, Camunda 7) are usually measured: latency at a load every server holds.
pub const NAMES: [&str; 9] = ["W1", "W2", "W3", "W4", "W5", "W6", "W2-25", "W8", "W9"];

/// Instances in flight in W2-25.
pub const W2_25_OUTSTANDING: usize = 25;

/// The named workload with its defaults.
pub fn named(name: &str) -> anyhow::Result<Workload> {
    let base = |description: &str, model: &str, model_name: &str, payload: &str, pace| Workload {
        name: name.to_uppercase(),
        description: description.into(),
        model: model.into(),
        model_name: model_name.into(),
        payload: payload.trim().into(),
        payload_bytes: payload.trim().len(),
        pace,
        job_type: "benchmark-task".into(),
        worker_delay: Duration::from_millis(50),
        // the worker is not the bottleneck: it can hold a job for every instance in flight
        worker_capacity: DEFAULT_OUTSTANDING,
        stream: true,
        with_result: false,
        publish_message: false,
        start_by_message: false,
        timer: None,
        decision: None,
        one_at_a_time: false,
    };
    let w = match name.to_uppercase().as_str() {
        "W1" => base(
            "one task, 46 KB payload, 150 PI/s, worker delay 50 ms, job push",
            ONE_TASK,
            "one_task.bpmn",
            PAYLOAD_BIG,
            Pace::Rate(150.0),
        ),
        "W2" | "W6" => Workload {
            worker_delay: Duration::ZERO,
            ..base(
                if name.eq_ignore_ascii_case("W6") {
                    "server start-up and memory, idle and under W2"
                } else {
                    "one task, 0.5 KB payload, no worker delay, as fast as it holds"
                },
                ONE_TASK,
                "one_task.bpmn",
                PAYLOAD_TYPICAL,
                Pace::Max { outstanding: DEFAULT_OUTSTANDING },
            )
        },
        "W2-25" => Workload {
            worker_delay: Duration::ZERO,
            ..base(
                "one task, 0.5 KB payload, no worker delay, 25 instances in flight",
                ONE_TASK,
                "one_task.bpmn",
                PAYLOAD_TYPICAL,
                Pace::Max { outstanding: W2_25_OUTSTANDING },
            )
        },
        "W3" => {
            base("ten tasks, 0.5 KB payload, 50 PI/s, worker delay 50 ms", TEN_TASKS, "ten_tasks.bpmn", PAYLOAD_TYPICAL, Pace::Rate(50.0))
        }
        "W4" => Workload {
            with_result: true,
            timer: Some(Duration::from_secs(1)),
            ..base("1 s timer, 54 B payload, 500 PI/s: timer lateness", TIMER, "timer.bpmn", PAYLOAD_SMALL, Pace::Rate(500.0))
        },
        "W5" => Workload {
            publish_message: true,
            worker_delay: Duration::ZERO,
            ..base(
                "message catch, message published after creation, 500 PI/s: correlation latency",
                MESSAGE_ONE_TASK,
                "message_one_task.bpmn",
                PAYLOAD_SMALL,
                Pace::Rate(500.0),
            )
        },
        "W8" => Workload {
            with_result: true,
            decision: Some(Decision { name: "rules.dmn".into(), content: RULES_DECISION.into() }),
            ..base(
                "business rule task (a first-hit decision table, 4 rules, 2 inputs), 54 B payload, as fast as it holds",
                RULES,
                "rules.bpmn",
                PAYLOAD_SMALL,
                Pace::Max { outstanding: DEFAULT_OUTSTANDING },
            )
        },
        "W9" => Workload {
            with_result: true,
            worker_delay: Duration::ZERO,
            one_at_a_time: true,
            ..base(
                "parallel multi-instance service task over 10,000 items, one instance at a time, no worker delay",
                MULTI_INSTANCE,
                "multi_instance.bpmn",
                PAYLOAD_SMALL,
                Pace::Max { outstanding: 1 },
            )
        },
        "W7" | "FAILOVER" | "CATCHUP" | "CATCH-UP" => {
            bail!("{name} starts a cluster of its own: `waggle bench cluster --waggle-bin PATH --scenarios w7,failover,catchup`")
        }
        _ => bail!("unknown workload {name:?}: expected one of {} or custom", NAMES.join(", ")),
    };
    Ok(w)
}

/// A custom workload from files (the default model and payload are W1's).
pub fn custom(model: Option<&Path>, payload: Option<&Path>) -> anyhow::Result<Workload> {
    let mut w = named("W1")?;
    w.name = "custom".into();
    w.description = "custom".into();
    if let Some(path) = model {
        w.model = std::fs::read_to_string(path).with_context(|| format!("reading model {}", path.display()))?;
        w.model_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model.bpmn".into());
    }
    if let Some(path) = payload {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading payload {}", path.display()))?;
        w.payload = text.trim().into();
        w.payload_bytes = w.payload.len();
    }
    Ok(w)
}

/// What the bench needs to know about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The executable process's id.
    pub process_id: String,
    /// Service tasks whose completion completes the instance (their outgoing flow ends at an end event).
    pub last_tasks: Vec<String>,
    /// Whether the model has any service task.
    pub has_tasks: bool,
    /// The name of the first message the model declares.
    pub message_name: Option<String>,
    /// Whether the process starts with a message start event.
    pub message_start: bool,
}

/// Reads the process id, the last service tasks and the message name of a BPMN model.
pub fn inspect(model: &str) -> anyhow::Result<ModelInfo> {
    let doc = roxmltree::Document::parse(model).context("parsing the BPMN model")?;
    let elems = || doc.descendants().filter(|n| n.is_element());
    let process = elems()
        .find(|n| n.tag_name().name() == "process" && n.attribute("isExecutable") != Some("false"))
        .context("the model has no executable process")?;
    let process_id = process.attribute("id").context("the process has no id")?.to_string();
    let ids_of = |tag: &str| -> Vec<String> {
        elems().filter(|n| n.tag_name().name() == tag).filter_map(|n| n.attribute("id")).map(String::from).collect()
    };
    let ends = ids_of("endEvent");
    let tasks = ids_of("serviceTask");
    let last_tasks = elems()
        .filter(|n| n.tag_name().name() == "sequenceFlow")
        .filter(|n| n.attribute("targetRef").is_some_and(|t| ends.iter().any(|e| e == t)))
        .filter_map(|n| n.attribute("sourceRef"))
        .filter(|s| tasks.iter().any(|t| t == s))
        .map(String::from)
        .collect();
    let message_name = elems().find(|n| n.tag_name().name() == "message").and_then(|n| n.attribute("name")).map(String::from);
    let message_start = process
        .children()
        .filter(|n| n.tag_name().name() == "startEvent")
        .any(|s| s.children().any(|d| d.tag_name().name() == "messageEventDefinition"));
    Ok(ModelInfo { process_id, last_tasks, has_tasks: !tasks.is_empty(), message_name, message_start })
}

/// Parses `150ms`, `30s`, `2m` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = num.trim().parse().map_err(|_| format!("not a duration: {text:?} (e.g. 50ms, 30s, 2m, 2h)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("not a duration: {text:?}"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspects_the_workload_models() {
        let one = inspect(ONE_TASK).unwrap();
        assert_eq!(one.process_id, "benchmark");
        assert_eq!(one.last_tasks, vec!["task"]);
        let ten = inspect(TEN_TASKS).unwrap();
        assert_eq!(ten.last_tasks, vec!["task10"]);
        let timer = inspect(TIMER).unwrap();
        assert!(!timer.has_tasks && timer.last_tasks.is_empty());
        let msg = inspect(MESSAGE_ONE_TASK).unwrap();
        assert_eq!(msg.message_name.as_deref(), Some("benchmark-message"));
        assert_eq!(msg.last_tasks, vec!["task1"]);
        assert!(!msg.message_start && !one.message_start, "a catch event is no message start");
        let start = inspect(MESSAGE_START_ONE_TASK).unwrap();
        assert!(start.message_start);
        assert_eq!(start.message_name.as_deref(), Some("benchmark-start"));
        assert_eq!(start.last_tasks, vec!["task"]);
    }

    #[test]
    fn named_workloads_and_payload_sizes() {
        assert_eq!(named("w1").unwrap().payload_bytes, 46050);
        assert_eq!(named("W2").unwrap().pace, Pace::Max { outstanding: DEFAULT_OUTSTANDING });
        assert_eq!(named("W5").unwrap().payload_bytes, 54);
        assert_eq!(named("w2-25").unwrap().pace, Pace::Max { outstanding: 25 });
        assert_eq!(named("W2-25").unwrap().name, "W2-25");
        assert!(named("W4").unwrap().with_result);
        assert!(named("W10").is_err());
        assert!(named("W8").unwrap().decision.is_some() && named("W8").unwrap().with_result);
        assert!(named("W9").unwrap().one_at_a_time && inspect(MULTI_INSTANCE).unwrap().has_tasks);
        for n in NAMES {
            serde_json::from_str::<serde_json::Value>(&named(n).unwrap().payload).unwrap();
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
