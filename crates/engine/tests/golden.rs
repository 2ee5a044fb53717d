//! Golden scenario tests (constraint C5): each `tests/scenarios/NAME.scenario` is a list of
//! commands; the exact records they produce are compared with `NAME.golden`. After processing,
//! state rebuilt from the logged events alone must equal the processed state byte for byte
//! (constraint C1, the replay check).
//!
//! Review a change of behaviour with `WAGGLE_REWRITE=1 cargo test -p waggle-engine --test golden`
//! and read the diff of the .golden files before committing them.
//!
//! Scenario lines (`#` starts a comment):
//! - `time MS`                                  set the clock
//! - `deploy FILE [FILE..]`                     deploy resources from tests/models (.bpmn,
//!   .dmn, .form: one deployment)
//! - `evaluate DECISION_ID|decision:ID|KEY [JSON]` evaluate a decision (EvaluateDecision):
//!   the newest version of an id, or by key
//! - `delete KEY`                               delete a resource (DeleteResource), e.g.
//!   `drg:ID` or `form:ID`
//! - `create PROCESS_ID [JSON]`                 create an instance
//! - `create-with-result PROCESS_ID [JSON]`
//! - `activate TYPE [MAX] [TIMEOUT_MS]`         activate jobs
//! - `complete JOB [JSON]`, `fail JOB RETRIES [BACKOFF_MS] [MESSAGE]`, `throw JOB CODE [MESSAGE]`
//! - `retries JOB N`, `timeout JOB MS`, `time-out JOB`, `recur JOB`
//! - `cancel INSTANCE`, `set SCOPE JSON [local]`, `resolve INCIDENT`
//! - `publish NAME CORRELATION_KEY TTL_MS [MESSAGE_ID] [JSON]`, `expire MESSAGE`
//! - `correlate NAME CORRELATION_KEY [JSON]`  correlate a message at once (MESSAGE_CORRELATION)
//! - `signal NAME [JSON]`                       broadcast a signal
//! - `create-at PROCESS_ID ELEMENT[,ELEMENT..] [JSON]`  create with start instructions
//! - `trigger TIMER`                            fire a timer (when due)
//! - `modify INSTANCE [+ELEMENT[@ANCESTOR] [SCOPE=JSON..]].. [-ELEMENT_INSTANCE]..`
//!   modify an instance: activate (variables for the activation before; an empty SCOPE
//!   is the process instance), terminate
//! - `migrate INSTANCE PROCESS [SOURCE=TARGET..]` migrate an instance to a process definition
//!   (`process:ID`: the newest deployed version of process ID)
//!
//! References: a number, or `job`, `instance`, `incident`, `message`, `timer` for the key of the
//! newest such entity, `job:TYPE` for the newest job of a type, `timer:ID` for the newest timer
//! of an event, `element:ID` for the newest instance of an element, or `decision:ID` for the
//! newest deployed decision of an id (`drg:ID`, `form:ID`: graphs and forms).

use std::path::PathBuf;

use waggle_engine::{Command, Engine, NoJobStreams, ProcessingContext, SideEffect};
use waggle_protocol::codec::Entry;
use waggle_protocol::value::*;
use waggle_protocol::{Intent, Record, RecordType, RecordValue};
use waggle_state::{KvStore, MemoryStore, Overlay};

struct Scenario {
    engine: Engine,
    store: MemoryStore,
    entries: Vec<Entry>,
    now_ms: i64,
    out: String,
    newest: std::collections::HashMap<String, i64>,
}

fn dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR"))).join("tests")
}

impl Scenario {
    fn new() -> Self {
        Self {
            engine: Engine::new(1),
            store: MemoryStore::new(),
            entries: vec![],
            now_ms: 0,
            out: String::new(),
            newest: Default::default(),
        }
    }

    fn reference(&self, word: &str) -> i64 {
        word.parse::<i64>().unwrap_or_else(|_| *self.newest.get(word).unwrap_or_else(|| panic!("nothing named '{word}' yet")))
    }

    /// Runs a command as one batch, then the commands that batch handed back to its own
    /// partition (a multi-instance body's next PROCESS_INSTANCE_BATCH ACTIVATE), each as a batch
    /// of its own, until none is left.
    fn run(&mut self, intent: Intent, key: i64, value: RecordValue) {
        let mut queue = std::collections::VecDeque::from([Command { request_id: Some(1), ..Command::new(key, intent, value) }]);
        while let Some(command) = queue.pop_front() {
            for effect in self.run_batch(command) {
                if let SideEffect::SendCommand { partition: 1, command } = effect {
                    queue.push_back(*command);
                }
            }
        }
    }

    fn run_batch(&mut self, command: Command) -> Vec<SideEffect> {
        let ctx = ProcessingContext { now_ms: self.now_ms, job_streams: &NoJobStreams, partition_count: 1, message_partition_count: 0 };
        let mut overlay = Overlay::new(&self.store);
        let output = self.engine.process_batch(&mut overlay, &ctx, vec![command]);
        let writes = overlay.into_writes();
        self.store.commit(&writes).unwrap();
        if let Some(entry) = output.entry() {
            // the bytes the broker logs decode as the entry replayed below
            let encoded = output.encoded_entry().expect("an entry's bytes");
            assert_eq!(Entry::decode(&encoded).expect("a decodable entry"), entry);
            self.entries.push(entry);
        }
        for r in &output.records {
            self.note(r);
            self.out.push_str(&render(r));
            self.out.push('\n');
        }
        for (_, r) in &output.responses {
            if r.position == 0 {
                self.out.push_str(&format!("  -> (not logged) {}\n", render(r)));
            } else if matches!(r.value, RecordValue::ProcessInstanceResult(_)) {
                self.out.push_str(&format!("  -> result {}\n", render(r)));
            } else {
                self.out.push_str(&format!("  -> answered by position {}\n", r.position));
            }
        }
        output.side_effects
    }

    fn note(&mut self, r: &Record) {
        if r.record_type != RecordType::Event {
            return;
        }
        match (&r.value, r.intent) {
            (RecordValue::Job(j), Intent::Created) => {
                self.newest.insert("job".into(), r.key);
                self.newest.insert(format!("job:{}", j.job_type), r.key);
                // `job:<type>#<n>`: the n-th job of the type (the inner instances of a
                // multi-instance task share their type)
                let n = (1..).find(|n| !self.newest.contains_key(&format!("job:{}#{n}", j.job_type))).expect("a free number");
                self.newest.insert(format!("job:{}#{n}", j.job_type), r.key);
            }
            (RecordValue::Incident(_), Intent::Created) => {
                self.newest.insert("incident".into(), r.key);
            }
            (RecordValue::UserTask(_), Intent::Created) => {
                self.newest.insert("usertask".into(), r.key);
            }
            (RecordValue::Process(p), Intent::Created) => {
                self.newest.insert(format!("process:{}", p.bpmn_process_id), r.key);
            }
            (RecordValue::DecisionRequirements(d), Intent::Created) => {
                self.newest.insert(format!("drg:{}", d.decision_requirements_id), r.key);
            }
            (RecordValue::Form(f), Intent::Created) => {
                self.newest.insert(format!("form:{}", f.form_id), r.key);
            }
            (RecordValue::Decision(d), Intent::Created) => {
                self.newest.insert(format!("decision:{}", d.decision_id), r.key);
            }
            (RecordValue::Message(_), Intent::Published) => {
                self.newest.insert("message".into(), r.key);
            }
            (RecordValue::Timer(t), Intent::Created) => {
                self.newest.insert("timer".into(), r.key);
                self.newest.insert(format!("timer:{}", t.target_element_id), r.key);
            }
            (RecordValue::ProcessInstance(pi), Intent::ElementActivating) => {
                if pi.bpmn_element_type == "PROCESS" {
                    self.newest.insert("instance".into(), r.key);
                }
                self.newest.insert(format!("element:{}", pi.element_id), r.key);
            }
            _ => {}
        }
    }

    fn line(&mut self, line: &str) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| words.get(i).copied().unwrap_or("");
        // the rest of the line from word i on (JSON documents may contain spaces)
        let rest = |i: usize| words.get(i..).map(|w| w.join(" ")).unwrap_or_default();
        self.out.push_str(&format!("> {line}\n"));
        let job = |retries: i32| JobRecord { retries, ..Default::default() };
        match words[0] {
            "time" => self.now_ms = arg(1).parse().unwrap(),
            "deploy" => {
                let resources = words[1..]
                    .iter()
                    .map(|f| DeploymentResource {
                        resource_name: f.to_string(),
                        resource: std::fs::read(dir().join("models").join(f)).unwrap(),
                    })
                    .collect();
                self.run(Intent::Create, -1, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() }));
            }
            "create" | "create-with-result" => {
                let intent = if words[0] == "create" { Intent::Create } else { Intent::CreateWithAwaitingResult };
                let value =
                    ProcessInstanceCreationRecord { bpmn_process_id: arg(1).into(), version: -1, variables: rest(2), ..Default::default() };
                self.run(intent, -1, RecordValue::ProcessInstanceCreation(value));
            }
            "activate" => {
                let value = JobBatchRecord {
                    job_type: arg(1).into(),
                    worker: "golden".into(),
                    max_jobs_to_activate: arg(2).parse().unwrap_or(10),
                    timeout_ms: arg(3).parse().unwrap_or(60_000),
                    ..Default::default()
                };
                self.run(Intent::Activate, -1, RecordValue::JobBatch(value));
            }
            "complete" => {
                let key = self.reference(arg(1));
                self.run(Intent::Complete, key, RecordValue::Job(JobRecord { variables: rest(2).into(), ..Default::default() }));
            }
            "fail" => {
                let key = self.reference(arg(1));
                let value = JobRecord {
                    retries: arg(2).parse().unwrap(),
                    retry_backoff_ms: arg(3).parse().unwrap_or(0),
                    error_message: rest(4),
                    ..Default::default()
                };
                self.run(Intent::Fail, key, RecordValue::Job(value));
            }
            "throw" => {
                let key = self.reference(arg(1));
                let value = JobRecord { error_code: arg(2).into(), error_message: rest(3), ..Default::default() };
                self.run(Intent::ThrowError, key, RecordValue::Job(value));
            }
            "retries" => {
                let key = self.reference(arg(1));
                self.run(Intent::UpdateRetries, key, RecordValue::Job(job(arg(2).parse().unwrap())));
            }
            "timeout" => {
                let key = self.reference(arg(1));
                self.run(
                    Intent::UpdateTimeout,
                    key,
                    RecordValue::Job(JobRecord { timeout_ms: arg(2).parse().unwrap(), ..Default::default() }),
                );
            }
            // 8.8's single JOB UPDATE: `update job <retries|-> <timeout|->` (`-`: not in the changeset)
            "update" => {
                let key = self.reference(arg(1));
                let value = JobRecord {
                    retries: if arg(2) == "-" { JobRecord::UNCHANGED_RETRIES } else { arg(2).parse().unwrap() },
                    timeout_ms: if arg(3) == "-" { JobRecord::UNCHANGED_TIMEOUT } else { arg(3).parse().unwrap() },
                    ..Default::default()
                };
                self.run(Intent::Update, key, RecordValue::Job(value));
            }
            "time-out" => {
                let key = self.reference(arg(1));
                self.run(Intent::TimeOut, key, RecordValue::Job(job(0)));
            }
            "recur" => {
                let key = self.reference(arg(1));
                self.run(Intent::RecurAfterBackoff, key, RecordValue::Job(job(0)));
            }
            "cancel" => {
                let key = self.reference(arg(1));
                self.run(Intent::Cancel, key, RecordValue::ProcessInstance(ProcessInstanceRecord::default()));
            }
            "set" => {
                let scope = self.reference(arg(1));
                let local = words.last() == Some(&"local");
                let doc = if local { words[2..words.len() - 1].join(" ") } else { rest(2) };
                let value = VariableDocumentRecord {
                    scope_key: scope,
                    update_semantics: if local { UpdateSemantics::Local } else { UpdateSemantics::Propagate },
                    variables: doc,
                };
                self.run(Intent::Update, -1, RecordValue::VariableDocument(value));
            }
            "modify" => {
                let instance = self.reference(arg(1));
                let mut value = ProcessInstanceModificationRecord { process_instance_key: instance, ..Default::default() };
                for word in &words[2..] {
                    if let Some(activate) = word.strip_prefix('+') {
                        let (element, ancestor) = match activate.split_once('@') {
                            Some((e, a)) => (e, self.reference(a)),
                            None => (activate, -1),
                        };
                        value.activate_instructions.push(ActivateInstruction {
                            element_id: element.into(),
                            ancestor_scope_key: ancestor,
                            ..Default::default()
                        });
                    } else if let Some(terminate) = word.strip_prefix('-') {
                        value.terminate_instructions.push(self.reference(terminate));
                    } else if let Some((scope, json)) = word.split_once('=') {
                        let last = value.activate_instructions.last_mut().expect("variables follow an activation");
                        last.variable_instructions.push(VariableInstruction { element_id: scope.into(), variables: json.into() });
                    }
                }
                self.run(Intent::Modify, instance, RecordValue::ProcessInstanceModification(value));
            }
            "migrate" => {
                let instance = self.reference(arg(1));
                let value = ProcessInstanceMigrationRecord {
                    process_instance_key: instance,
                    target_process_definition_key: self.reference(arg(2)),
                    mapping_instructions: words[3..]
                        .iter()
                        .filter_map(|w| w.split_once('='))
                        .map(|(s, t)| (s.to_string(), t.to_string()))
                        .collect(),
                };
                self.run(Intent::Migrate, instance, RecordValue::ProcessInstanceMigration(value));
            }
            // `task <ref> complete <vars>` | `assign <who>` | `unassign` | `claim <who>` |
            // `update <field>=<value>...` (fields: dueDate, followUpDate, candidateGroupsList,
            // candidateUsersList with comma-separated values)
            "task" => {
                let key = self.reference(arg(1));
                let mut value = UserTaskRecord::default();
                let intent = match arg(2) {
                    "complete" => {
                        value.variables = rest(3);
                        Intent::Complete
                    }
                    "assign" => {
                        value.assignee = arg(3).into();
                        Intent::Assign
                    }
                    "unassign" => {
                        value.action = "unassign".into();
                        Intent::Assign
                    }
                    "claim" => {
                        value.assignee = arg(3).into();
                        Intent::Claim
                    }
                    "update" => {
                        for (field, v) in words[3..].iter().filter_map(|w| w.split_once('=')) {
                            let list = || v.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
                            match field {
                                "dueDate" => value.due_date = v.into(),
                                "followUpDate" => value.follow_up_date = v.into(),
                                "candidateGroupsList" => value.candidate_groups = list(),
                                "candidateUsersList" => value.candidate_users = list(),
                                _ => {}
                            }
                            value.changed_attributes.push(field.into());
                        }
                        Intent::Update
                    }
                    other => panic!("unknown task command {other}"),
                };
                self.run(intent, key, RecordValue::UserTask(value));
            }
            "resolve" => {
                let key = self.reference(arg(1));
                self.run(Intent::Resolve, key, RecordValue::Incident(IncidentRecord::default()));
            }
            "publish" => {
                let value = MessageRecord {
                    name: arg(1).into(),
                    correlation_key: arg(2).into(),
                    time_to_live_ms: arg(3).parse().unwrap(),
                    message_id: if arg(4) == "-" { String::new() } else { arg(4).into() },
                    variables: rest(5),
                    ..Default::default()
                };
                self.run(Intent::Publish, -1, RecordValue::Message(value));
            }
            "correlate" => {
                let value = MessageCorrelationRecord {
                    name: arg(1).into(),
                    correlation_key: arg(2).into(),
                    variables: rest(3),
                    message_key: -1,
                    process_instance_key: -1,
                    ..Default::default()
                };
                self.run(Intent::Correlate, -1, RecordValue::MessageCorrelation(value));
            }
            "signal" => {
                let value = SignalRecord { signal_name: arg(1).into(), variables: rest(2), ..Default::default() };
                self.run(Intent::Broadcast, -1, RecordValue::Signal(value));
            }
            "create-at" => {
                let value = ProcessInstanceCreationRecord {
                    bpmn_process_id: arg(1).into(),
                    version: -1,
                    start_instructions: arg(2).split(',').map(str::to_string).collect(),
                    variables: rest(3),
                    ..Default::default()
                };
                self.run(Intent::Create, -1, RecordValue::ProcessInstanceCreation(value));
            }
            "evaluate" => {
                let (decision_key, decision_id) = match arg(1) {
                    word if word.starts_with("decision:") || word.parse::<i64>().is_ok() => (self.reference(word), String::new()),
                    word => (-1, word.to_string()),
                };
                let value = DecisionEvaluationRecord { decision_key, decision_id, variables: rest(2), ..Default::default() };
                self.run(Intent::Evaluate, -1, RecordValue::DecisionEvaluation(value));
            }
            "delete" => {
                let key = self.reference(arg(1));
                let value = ResourceDeletionRecord { resource_key: key, tenant_id: "<default>".into() };
                self.run(Intent::Delete, key, RecordValue::ResourceDeletion(value));
            }
            "trigger" => {
                let key = self.reference(arg(1));
                self.run(Intent::Trigger, key, RecordValue::Timer(TimerRecord::default()));
            }
            "expire" => {
                let key = self.reference(arg(1));
                self.run(Intent::Expire, key, RecordValue::Message(MessageRecord::default()));
            }
            other => panic!("unknown scenario command '{other}'"),
        }
    }

    /// Rebuilds state from the logged events alone and compares it with the processed state.
    fn check_replay(&self) -> Result<(), String> {
        let replayed = MemoryStore::new();
        let mut engine = Engine::new(1);
        for entry in &self.entries {
            let mut overlay = Overlay::new(&replayed);
            engine.replay(&mut overlay, entry);
            replayed.commit(&overlay.into_writes()).unwrap();
        }
        // and from the entries' bytes, record by record, as followers and recovery replay
        let replayed_encoded = MemoryStore::new();
        let mut engine = Engine::new(1);
        for entry in &self.entries {
            let mut overlay = Overlay::new(&replayed_encoded);
            engine.replay_encoded(&mut overlay, &entry.encode()).map_err(|e| e.to_string())?;
            replayed_encoded.commit(&overlay.into_writes()).unwrap();
        }
        if replayed_encoded.dump() != replayed.dump() {
            return Err("state replayed from the entries' bytes differs from state replayed from the entries".into());
        }
        let (a, b) = (self.store.dump(), replayed.dump());
        if a != b {
            let only_processed: Vec<_> =
                a.iter().filter(|kv| !b.contains(kv)).map(|(k, _)| String::from_utf8_lossy(k).into_owned()).collect();
            let only_replayed: Vec<_> =
                b.iter().filter(|kv| !a.contains(kv)).map(|(k, _)| String::from_utf8_lossy(k).into_owned()).collect();
            return Err(format!(
                "replayed state differs: only/different after processing {only_processed:?}, after replay {only_replayed:?}"
            ));
        }
        Ok(())
    }

    /// Variables and taken-flow counts live only as long as their scope: none may outlive the
    /// element instance they belong to.
    fn check_no_orphans(&self) -> Result<(), String> {
        let dump = self.store.dump();
        let keys: std::collections::HashSet<&[u8]> = dump.iter().map(|(k, _)| k.as_slice()).collect();
        let orphans: Vec<String> = dump
            .iter()
            .filter(|(k, _)| (k.starts_with(b"V/") || k.starts_with(b"F/")) && k.len() >= 10)
            .filter(|(k, _)| !keys.contains([b"E/".as_slice(), &k[2..10]].concat().as_slice()))
            // a kept trigger (PROCESS_EVENT) or a terminating scope's index row without its scope
            .chain(
                dump.iter()
                    .filter(|(k, _)| (k.starts_with(b"PE/") || k.starts_with(b"TS/")) && k.len() >= 11)
                    .filter(|(k, _)| !keys.contains([b"E/".as_slice(), &k[3..11]].concat().as_slice())),
            )
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        if orphans.is_empty() {
            Ok(())
        } else {
            Err(format!("rows outlive their scope: {orphans:?}"))
        }
    }
}

fn short(key: i64) -> String {
    if key < 0 {
        return "-".into();
    }
    format!("{}", waggle_protocol::key_counter(key))
}

/// One line per record: position, source, key (counter part), type, value type, intent, details.
fn render(r: &Record) -> String {
    let kind = match r.record_type {
        RecordType::Command => "C",
        RecordType::Event => "E",
        RecordType::CommandRejection => "R",
    };
    let details = match &r.value {
        RecordValue::Deployment(d) => {
            let dup = |duplicate: bool| if duplicate { " duplicate" } else { "" };
            let processes = d
                .processes_metadata
                .iter()
                .map(|m| format!("{} v{} key={}{}", m.bpmn_process_id, m.version, short(m.process_definition_key), dup(m.duplicate)));
            let drgs = d.decision_requirements_metadata.iter().map(|m| {
                format!(
                    "drg {} v{} key={}{}",
                    m.decision_requirements_id,
                    m.decision_requirements_version,
                    short(m.decision_requirements_key),
                    dup(m.duplicate)
                )
            });
            let decisions = d.decisions_metadata.iter().map(|m| {
                format!(
                    "decision {} v{} key={} drg={}{}",
                    m.decision_id,
                    m.version,
                    short(m.decision_key),
                    short(m.decision_requirements_key),
                    dup(m.duplicate)
                )
            });
            let forms =
                d.form_metadata.iter().map(|m| format!("form {} v{} key={}{}", m.form_id, m.version, short(m.form_key), dup(m.duplicate)));
            processes.chain(drgs).chain(decisions).chain(forms).collect::<Vec<_>>().join(", ")
        }
        RecordValue::DecisionRequirements(r) => format!(
            "{} v{} name={} namespace={} resource={} ({} bytes)",
            r.decision_requirements_id,
            r.decision_requirements_version,
            r.decision_requirements_name,
            r.namespace,
            r.resource_name,
            r.resource.len()
        ),
        RecordValue::Decision(d) => {
            format!(
                "{} v{} name={} drg={} key={}",
                d.decision_id,
                d.version,
                d.decision_name,
                d.decision_requirements_id,
                short(d.decision_requirements_key)
            )
        }
        RecordValue::ResourceDeletion(d) => format!("resource={}", short(d.resource_key)),
        RecordValue::Form(f) => format!("{} v{} resource={} ({} bytes)", f.form_id, f.version, f.resource_name, f.resource.len()),
        RecordValue::DecisionEvaluation(e) => {
            let evaluated: Vec<String> = e
                .evaluated_decisions
                .iter()
                .map(|d| {
                    let inputs: Vec<String> =
                        d.evaluated_inputs.iter().map(|i| format!("{}:{}={}", i.input_id, i.input_name, i.input_value)).collect();
                    let rules: Vec<String> = d
                        .matched_rules
                        .iter()
                        .map(|r| {
                            let outputs: Vec<String> = r
                                .evaluated_outputs
                                .iter()
                                .map(|o| format!("{}:{}={}", o.output_id, o.output_name, o.output_value))
                                .collect();
                            format!("#{} {} -> {}", r.rule_index, r.rule_id, outputs.join(" "))
                        })
                        .collect();
                    format!(
                        "{{{} v{} key={} {} output={} inputs=[{}] rules=[{}]}}",
                        d.decision_id,
                        d.decision_version,
                        short(d.decision_key),
                        d.decision_type,
                        d.decision_output,
                        inputs.join(" "),
                        rules.join("; ")
                    )
                })
                .collect();
            let failure = if e.failed_decision_id.is_empty() {
                String::new()
            } else {
                format!(" failed={} \"{}\"", e.failed_decision_id, e.evaluation_failure_message)
            };
            format!(
                "{} v{} key={} drg={} element={} output={} vars={} evaluated=[{}]{failure}",
                e.decision_id,
                e.decision_version,
                short(e.decision_key),
                e.decision_requirements_id,
                short(e.element_instance_key),
                e.decision_output,
                e.variables,
                evaluated.join(", ")
            )
        }
        RecordValue::Process(p) => format!("{} v{}", p.bpmn_process_id, p.version),
        RecordValue::ProcessInstance(pi) => {
            let parent = if pi.parent_process_instance_key > 0 {
                format!(" parent={}/{}", short(pi.parent_process_instance_key), short(pi.parent_element_instance_key))
            } else {
                String::new()
            };
            format!("{} {} scope={}{parent}", pi.bpmn_element_type, pi.element_id, short(pi.flow_scope_key))
        }
        RecordValue::ProcessInstanceCreation(c) => format!("{} instance={}", c.bpmn_process_id, short(c.process_instance_key)),
        RecordValue::ProcessInstanceResult(res) => format!("{} variables={}", res.bpmn_process_id, res.variables),
        RecordValue::Job(j) => format!(
            "type={} retries={} element={} deadline={} worker={} vars={} err={}:{}{}",
            j.job_type,
            j.retries,
            short(j.element_instance_key),
            j.deadline_ms,
            j.worker,
            j.variables,
            j.error_code,
            j.error_message,
            if j.custom_headers.is_empty() || j.custom_headers == "{}" { String::new() } else { format!(" headers={}", j.custom_headers) }
        ),
        RecordValue::JobBatch(b) => format!(
            "type={} jobs=[{}] vars=[{}]",
            b.job_type,
            b.job_keys.iter().map(|k| short(*k)).collect::<Vec<_>>().join(","),
            b.jobs.iter().map(|j| j.variables.clone()).collect::<Vec<_>>().join(" ")
        ),
        RecordValue::Variable(v) => format!("{}={} scope={}", v.name, v.value, short(v.scope_key)),
        RecordValue::VariableDocument(d) => format!("scope={} {:?} {}", short(d.scope_key), d.update_semantics, d.variables),
        RecordValue::Incident(i) => {
            format!("{} element={} job={} \"{}\"", i.error_type, short(i.element_instance_key), short(i.job_key), i.error_message)
        }
        RecordValue::Message(m) => format!("{} key={} ttl={} id={}", m.name, m.correlation_key, m.time_to_live_ms, m.message_id),
        RecordValue::Timer(t) => {
            format!("{} element={} due={} repetitions={}", t.target_element_id, short(t.element_instance_key), t.due_date_ms, t.repetitions)
        }
        RecordValue::MessageSubscription(m) => format!(
            "{} key={} element={} message={} vars={}",
            m.message_name,
            m.correlation_key,
            short(m.element_instance_key),
            short(m.message_key),
            m.variables
        ),
        RecordValue::ProcessMessageSubscription(m) => format!(
            "{} key={} element={} event={} message={} vars={}",
            m.message_name,
            m.correlation_key,
            short(m.element_instance_key),
            m.element_id,
            short(m.message_key),
            m.variables
        ),
        RecordValue::MessageStartEventSubscription(m) => format!(
            "{} {} event={} key={} message={} instance={}",
            m.message_name,
            m.bpmn_process_id,
            m.start_event_id,
            m.correlation_key,
            short(m.message_key),
            short(m.process_instance_key)
        ),
        RecordValue::Signal(sig) => format!("{} vars={}", sig.signal_name, sig.variables),
        RecordValue::SignalSubscription(sub) => {
            format!(
                "{} {} event={} element={}",
                sub.signal_name,
                sub.bpmn_process_id,
                sub.catch_event_id,
                short(sub.catch_event_instance_key)
            )
        }
        RecordValue::CommandDistribution(d) => {
            format!("partition={} {} {} command={}", d.partition_id, d.value_type, d.intent, short(d.command_key))
        }
        RecordValue::ProcessInstanceMigration(m) => {
            let mapping: Vec<String> = m.mapping_instructions.iter().map(|(s, t)| format!("{s}={t}")).collect();
            format!("instance={} target={} {}", short(m.process_instance_key), short(m.target_process_definition_key), mapping.join(" "))
        }
        RecordValue::ProcessInstanceModification(m) => {
            let activate: Vec<String> = m
                .activate_instructions
                .iter()
                .map(|a| {
                    let scopes: Vec<String> = a.ancestor_scope_keys.iter().map(|k| short(*k).to_string()).collect();
                    let vars: Vec<String> = a.variable_instructions.iter().map(|v| format!("{}={}", v.element_id, v.variables)).collect();
                    format!("+{}@{} [{}] {}", a.element_id, short(a.ancestor_scope_key), scopes.join(","), vars.join(" "))
                })
                .collect();
            let terminate: Vec<String> = m.terminate_instructions.iter().map(|k| format!("-{}", short(*k))).collect();
            format!("instance={} {} {}", short(m.process_instance_key), activate.join(" "), terminate.join(" "))
        }
        RecordValue::ProcessInstanceBatch(b) => format!("body={} index={}", short(b.batch_element_instance_key), b.index),
        RecordValue::CompensationSubscription(c) => format!(
            "{}@{} in {}@{} handler={}@{} throw={}@{}",
            c.compensable_activity_id,
            short(c.compensable_activity_instance_key),
            c.compensable_activity_scope_id,
            short(c.compensable_activity_scope_key),
            c.compensation_handler_id,
            short(c.compensation_handler_instance_key),
            c.throw_event_id,
            short(c.throw_event_instance_key)
        ),
        RecordValue::UserTask(u) => format!(
            "{}@{} assignee={} groups={:?} users={:?} due={} followUp={} form={} ref={} headers={} vars={} changed={:?} action={}",
            u.element_id,
            short(u.element_instance_key),
            u.assignee,
            u.candidate_groups,
            u.candidate_users,
            u.due_date,
            u.follow_up_date,
            short(u.form_key),
            u.external_form_reference,
            u.custom_headers,
            u.variables,
            u.changed_attributes,
            u.action
        ),
        RecordValue::ProcessEvent(e) => format!("{}@{} vars={}", e.target_element_id, short(e.scope_key), e.variables),
        RecordValue::MessageCorrelation(c) => format!(
            "{} key={} message={} instance={} vars={}",
            c.name,
            c.correlation_key,
            short(c.message_key),
            short(c.process_instance_key),
            c.variables
        ),
        RecordValue::Checkpoint(c) => format!("checkpoint={} position={}", c.checkpoint_id, c.checkpoint_position),
        RecordValue::Scale(s) => format!("scale={}->{}", s.current_partition_count, s.desired_partition_count),
        RecordValue::MessageRelocation(r) => format!(
            "relocation={}->{} key={} messages={} subscriptions={} started={}",
            r.partition_count,
            r.desired_partition_count,
            r.correlation_key,
            r.messages.len(),
            r.subscriptions.len(),
            r.started_instances.len()
        ),
    };
    let rejection = r.rejection.as_ref().map(|x| format!(" !{} \"{}\"", x.rejection_type.as_str(), x.reason)).unwrap_or_default();
    format!("{:>3} {:>3} {:>4} {kind} {} {} {details}{rejection}", r.position, r.source_position, short(r.key), r.value_type, r.intent)
}

#[test]
fn golden_scenarios() {
    let rewrite = std::env::var("WAGGLE_REWRITE").is_ok();
    let mut failures = Vec::new();
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(dir().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "scenario"))
        .collect();
    scenarios.sort();
    assert!(!scenarios.is_empty(), "no scenarios found");
    for path in scenarios {
        let mut s = Scenario::new();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            eprintln!("{}: {line}", path.display());
            s.line(line);
        }
        if let Err(e) = s.check_replay().and_then(|()| s.check_no_orphans()) {
            failures.push(format!("{}: {e}", path.display()));
        }
        let golden = path.with_extension("golden");
        if rewrite {
            std::fs::write(&golden, &s.out).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != s.out {
            failures.push(format!(
                "{} differs from {} (WAGGLE_REWRITE=1 to update after review):\n{}",
                path.display(),
                golden.display(),
                diff(&expected, &s.out)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<_> = expected.lines().collect();
    let a: Vec<_> = actual.lines().collect();
    let mut out = String::new();
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i).copied().unwrap_or(""), a.get(i).copied().unwrap_or(""));
        if x != y {
            out.push_str(&format!("line {}:\n- {x}\n+ {y}\n", i + 1));
        }
    }
    out
}
