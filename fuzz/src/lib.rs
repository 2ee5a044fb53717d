//! What the fuzz targets share: the FEEL context they evaluate against and, for the gRPC and
//! REST targets, a whole node in the process (a real broker on a temporary directory, the gRPC
//! gateway's handlers and the REST router over an SQLite query store), started once per
//! fuzzing process with a few resources deployed so that inputs can reach running instances.

use serde_json::{json, Value};

/// Variables a FEEL or DMN input is evaluated with: one of each kind of value.
pub fn feel_context() -> Value {
    json!({
        "n": 42.5,
        "i": 7,
        "s": "hello",
        "b": true,
        "z": null,
        "l": [1, 2, 3, "x", [4, 5], {"k": "v"}],
        "c": {"a": 1, "b": {"c": [true, false]}, "d": "2024-02-29"},
        "date": "2024-02-29",
        "time": "12:30:00+01:00",
        "dt": "2024-02-29T12:30:00@Europe/Berlin",
        "dur": "P1DT2H",
        "ym": "P1Y2M",
        "amount": 1200,
        "category": "gold",
    })
}

#[cfg(feature = "node")]
pub use node::{node, Node, CALL_LIMIT};

#[cfg(feature = "node")]
mod node {
    use std::path::PathBuf;
    use std::sync::{Arc, OnceLock};
    use std::time::Duration;

    use waggle_broker::{Broker, BrokerConfig};
    use waggle_gateway::{GatewayConfig, GatewayService, StandaloneTopology};
    use waggle_protocol::gateway as pb;
    use waggle_protocol::gateway::gateway_server::Gateway as _;

    /// How long one call may wait (a long poll, an awaited result) before the target drops it
    /// and moves on: waiting is an answer, not a hang (a hang keeps a thread busy, and
    /// libFuzzer's `-timeout` reports it).
    pub const CALL_LIMIT: Duration = Duration::from_secs(1);

    /// A node in the process: the broker, its gateway handlers and the REST router.
    pub struct Node {
        pub runtime: tokio::runtime::Runtime,
        pub gateway: Arc<GatewayService>,
        pub rest: axum::Router,
        _broker: Arc<Broker>,
    }

    /// The node, started on first use (a directory under /dev/shm when there is one).
    pub fn node() -> &'static Node {
        static NODE: OnceLock<Node> = OnceLock::new();
        NODE.get_or_init(start)
    }

    fn start() -> Node {
        let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("waggle-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        let registry = prometheus::Registry::new();
        let location = waggle_store::Location::Sqlite(waggle_store::path_in(&dir));
        let store = waggle_store::exporter::StoreConfig { location: location.clone(), history_ttl: None };
        let exporter = waggle_store::exporter::factory("query-store", store).expect("store exporter");
        let config = BrokerConfig {
            data_dir: dir.clone(),
            export: waggle_broker::export::ExportConfig { exporters: vec![Arc::new(exporter)], ..Default::default() },
            ..Default::default()
        };
        let broker = runtime.block_on(async { Broker::start(config, &registry) }).expect("broker");
        let gateway_config = GatewayConfig { long_polling_timeout: Duration::from_millis(50), ..Default::default() };
        let gateway = Arc::new(GatewayService::new(broker.clone(), gateway_config, &registry));
        let topology = Arc::new(StandaloneTopology { broker: broker.clone(), host: "127.0.0.1".into(), port: 26500 });
        let reader = waggle_store::Reader::new(location).expect("query store");
        let rest =
            waggle_rest::router(Arc::new(waggle_rest::RestState { store: Some(Arc::new(reader)), gateway: gateway.clone(), topology }));
        let node = Node { runtime, gateway, rest, _broker: broker };
        node.runtime.block_on(node.deploy_seeds()).expect("the seed deployment");
        node
    }

    impl Node {
        /// Deploys the process and the decision inputs reach (again after an input deleted
        /// them: a deployment of unchanged resources is a no-op).
        pub async fn deploy_seeds(&self) -> Result<(), tonic::Status> {
            let resources = vec![
                pb::Resource { name: "fuzz.bpmn".into(), content: PROCESS.as_bytes().to_vec() },
                pb::Resource { name: "fuzz.dmn".into(), content: DECISION.as_bytes().to_vec() },
            ];
            let request = pb::DeployResourceRequest { resources, tenant_id: String::new() };
            self.gateway.deploy_resource(tonic::Request::new(request)).await.map(drop)
        }
    }

    /// A process with what commands can reach: a job (`work`), a message catch (`msg`,
    /// correlated by `=key`), a user task, a business rule task, a signal catch.
    const PROCESS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
  <bpmn:message id="m" name="msg"><bpmn:extensionElements><zeebe:subscription correlationKey="=key" /></bpmn:extensionElements></bpmn:message>
  <bpmn:signal id="sig" name="sig" />
  <bpmn:process id="fuzz" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="job" />
    <bpmn:serviceTask id="job"><bpmn:extensionElements><zeebe:taskDefinition type="work" retries="3" /></bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:sequenceFlow id="f2" sourceRef="job" targetRef="catch" />
    <bpmn:intermediateCatchEvent id="catch"><bpmn:messageEventDefinition messageRef="m" /></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f3" sourceRef="catch" targetRef="rule" />
    <bpmn:businessRuleTask id="rule"><bpmn:extensionElements><zeebe:calledDecision decisionId="d" resultVariable="r" /></bpmn:extensionElements></bpmn:businessRuleTask>
    <bpmn:sequenceFlow id="f4" sourceRef="rule" targetRef="task" />
    <bpmn:userTask id="task"><bpmn:extensionElements><zeebe:userTask /></bpmn:extensionElements></bpmn:userTask>
    <bpmn:sequenceFlow id="f5" sourceRef="task" targetRef="wait" />
    <bpmn:intermediateCatchEvent id="wait"><bpmn:signalEventDefinition signalRef="sig" /></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f6" sourceRef="wait" targetRef="end" />
    <bpmn:endEvent id="end" />
  </bpmn:process>
</bpmn:definitions>"#;

    /// A decision table on `amount` and `category`.
    const DECISION: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="drg" name="D" namespace="n">
  <decision id="d" name="D">
    <decisionTable id="t" hitPolicy="FIRST">
      <input id="i1"><inputExpression id="e1" typeRef="number"><text>amount</text></inputExpression></input>
      <input id="i2"><inputExpression id="e2" typeRef="string"><text>category</text></inputExpression></input>
      <output id="o" name="discount" typeRef="number" />
      <rule id="r1"><inputEntry id="a1"><text>&gt; 1000</text></inputEntry><inputEntry id="b1"><text>"gold"</text></inputEntry><outputEntry id="c1"><text>0.2</text></outputEntry></rule>
      <rule id="r2"><inputEntry id="a2"><text>-</text></inputEntry><inputEntry id="b2"><text>-</text></inputEntry><outputEntry id="c2"><text>0</text></outputEntry></rule>
    </decisionTable>
  </decision>
</definitions>"#;
}
