//! Hostile and careless input against the real binary: each case sends one request that used
//! to crash the node or hold its partition (a deployment nested 50,000 deep overflowed the
//! stack; a creation of 200,000 variables held the partition for 40 s), then checks that the
//! node still answers and runs an instance end to end within a second.

mod common;

use std::time::{Duration, Instant};

use common::{deploy_one_task, grpc_client, Node};
use tonic::transport::Channel;
use tonic::Code;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

/// How soon after the hostile request the node must run a one-task instance end to end.
const WITHIN: Duration = Duration::from_secs(1);

/// Deploys `one_task.bpmn`, then runs one instance of it end to end (created with its result
/// awaited, its job activated and completed) and fails unless that all takes at most [`WITHIN`].
async fn runs_an_instance_end_to_end(node: &Node) {
    let mut client = grpc_client(node).await;
    let started = Instant::now();
    let run = async {
        deploy_one_task(&mut client).await;
        let mut creator = client.clone();
        let created = tokio::spawn(async move {
            let request = CreateProcessInstanceWithResultRequest {
                request: Some(CreateProcessInstanceRequest { bpmn_process_id: "benchmark".into(), version: -1, ..Default::default() }),
                request_timeout: 5_000,
                fetch_variables: vec![],
            };
            creator.create_process_instance_with_result(request).await
        });
        // completes every job of the type (an earlier case may have left some) until the result is in
        while !created.is_finished() {
            let mut activation = common::one_task_activation(100);
            activation.request_timeout = 50;
            let mut answers = client.activate_jobs(activation).await.expect("activate").into_inner();
            while let Some(batch) = answers.message().await.expect("activation stream") {
                for job in batch.jobs {
                    client.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("complete");
                }
            }
        }
        created.await.expect("creator task").expect("the instance's result")
    };
    let result = tokio::time::timeout(WITHIN, run).await;
    assert!(result.is_ok(), "no instance ran end to end within {WITHIN:?} (gave up after {:?}); log:\n{}", started.elapsed(), tail(node));
}

fn tail(node: &Node) -> String {
    let log = node.log();
    log[log.len().saturating_sub(4_000)..].to_string()
}

async fn deploy(client: &mut GatewayClient<Channel>, name: &str, content: Vec<u8>) -> Result<DeployResourceResponse, tonic::Status> {
    client
        .deploy_resource(DeployResourceRequest { resources: vec![Resource { name: name.into(), content }], tenant_id: String::new() })
        .await
        .map(|r| r.into_inner())
}

fn definitions(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
{body}
</bpmn:definitions>"#
    )
}

/// A process of `depth` embedded subprocesses, each inside the one before; with `runnable`,
/// each has a start event that starts the next, and the innermost a task of type `deep-task`
/// (BPMN's namespace is the default one, so 50,000 bare levels take 1.6 MB).
fn nested_subprocesses(depth: usize, runnable: bool) -> String {
    let mut xml = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d"><process id="deep" isExecutable="true"><startEvent id="start"/>"#,
    );
    for i in 0..depth {
        xml.push_str(&format!(r#"<subProcess id="p{i}">"#));
        if runnable {
            xml.push_str(&format!(r#"<startEvent id="s{i}"/>"#));
        }
    }
    if runnable {
        let last = depth - 1;
        xml.push_str(&format!(
            r#"<serviceTask id="t"><extensionElements><zeebe:taskDefinition type="deep-task"/></extensionElements></serviceTask><sequenceFlow id="t{last}" sourceRef="s{last}" targetRef="t"/>"#
        ));
    }
    for i in (0..depth).rev() {
        if runnable && i + 1 < depth {
            xml.push_str(&format!(r#"<sequenceFlow id="a{i}" sourceRef="s{i}" targetRef="p{}"/>"#, i + 1));
        }
        xml.push_str("</subProcess>");
    }
    xml.push_str(r#"<sequenceFlow id="f" sourceRef="start" targetRef="p0"/></process></definitions>"#);
    xml
}

fn expect_invalid(result: Result<DeployResourceResponse, tonic::Status>, naming: &str) {
    let status = result.expect_err("the deployment is rejected");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains(naming), "expected the message to name '{naming}': {}", status.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subprocesses_nested_50000_deep_are_rejected_naming_the_limit() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    let xml = nested_subprocesses(50_000, false);
    assert!(xml.len() > 1_000_000 && xml.len() < 4_000_000, "{}", xml.len());
    expect_invalid(deploy(&mut client, "deep.bpmn", xml.into_bytes()).await, "limit of 100 levels (max_bpmn_element_depth)");
    runs_an_instance_end_to_end(&node).await;
    // nesting within the limit deploys (the engine's walks over nested scopes are bounded too)
    deploy(&mut client, "deep.bpmn", nested_subprocesses(90, true).into_bytes()).await.expect("90 nested subprocesses deploy");
    let created = client
        .create_process_instance(CreateProcessInstanceRequest { bpmn_process_id: "deep".into(), version: -1, ..Default::default() })
        .await
        .expect("an instance of 90 nested subprocesses");
    client
        .cancel_process_instance(CancelProcessInstanceRequest { process_instance_key: created.into_inner().process_instance_key })
        .await
        .expect("cancel terminates 90 nested scopes");
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_element_depth_limit_is_configurable() {
    let node = Node::start(&["--max-bpmn-element-depth", "20"]);
    let mut client = grpc_client(&node).await;
    expect_invalid(deploy(&mut client, "deep.bpmn", nested_subprocesses(25, true).into_bytes()).await, "limit of 20 levels");
    deploy(&mut client, "deep.bpmn", nested_subprocesses(15, true).into_bytes()).await.expect("15 nested subprocesses deploy");
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_at_the_highest_configurable_limit_runs_and_cancels() {
    let node = Node::start(&["--max-bpmn-element-depth", "1000"]);
    let mut client = grpc_client(&node).await;
    // definitions and process take two levels, the task and its task definition three more
    deploy(&mut client, "deep.bpmn", nested_subprocesses(995, true).into_bytes()).await.expect("995 nested subprocesses deploy");
    let created = client
        .create_process_instance(CreateProcessInstanceRequest { bpmn_process_id: "deep".into(), version: -1, ..Default::default() })
        .await
        .expect("an instance of 995 nested subprocesses")
        .into_inner();
    let activation = ActivateJobsRequest {
        r#type: "deep-task".into(),
        max_jobs_to_activate: 1,
        timeout: 60_000,
        request_timeout: 5_000,
        ..Default::default()
    };
    let mut answers = client.activate_jobs(activation).await.expect("activate").into_inner();
    let job = answers.message().await.expect("stream").expect("the innermost task's job").jobs.remove(0);
    assert_eq!(job.process_instance_key, created.process_instance_key);
    client
        .cancel_process_instance(CancelProcessInstanceRequest { process_instance_key: created.process_instance_key })
        .await
        .expect("cancel terminates 995 nested scopes");
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feel_expression_nested_50000_deep_is_rejected_naming_the_limit() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    let condition = format!("={}true{}", "(".repeat(50_000), ")".repeat(50_000));
    let xml = definitions(&format!(
        r#"<bpmn:process id="feel" isExecutable="true"><bpmn:startEvent id="start" /><bpmn:exclusiveGateway id="g" default="f3" /><bpmn:endEvent id="a" /><bpmn:endEvent id="b" />
<bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="g" /><bpmn:sequenceFlow id="f2" sourceRef="g" targetRef="a"><bpmn:conditionExpression>{condition}</bpmn:conditionExpression></bpmn:sequenceFlow><bpmn:sequenceFlow id="f3" sourceRef="g" targetRef="b" /></bpmn:process>"#
    ));
    expect_invalid(deploy(&mut client, "feel.bpmn", xml.into_bytes()).await, "FEEL's nesting limit");
    // a chain of 300,000 additions nests its syntax tree as deeply
    let chain = format!("={}", vec!["1"; 300_000].join("+"));
    let xml = definitions(&format!(
        r#"<bpmn:process id="chain" isExecutable="true"><bpmn:startEvent id="start"><bpmn:extensionElements><zeebe:ioMapping><zeebe:output source="{chain}" target="x" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:startEvent></bpmn:process>"#
    ));
    expect_invalid(deploy(&mut client, "chain.bpmn", xml.into_bytes()).await, "FEEL's nesting limit");
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_bomb_and_markup_in_entities_are_rejected() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    let mut entities = String::from("<!ENTITY lol0 \"lol\">");
    for i in 1..10 {
        let refs = format!("&lol{};", i - 1).repeat(10);
        entities.push_str(&format!("<!ENTITY lol{i} \"{refs}\">"));
    }
    let bomb = format!("<?xml version=\"1.0\"?><!DOCTYPE lolz [{entities}]><lolz>&lol9;</lolz>");
    let status = deploy(&mut client, "bomb.bpmn", bomb.into_bytes()).await.expect_err("rejected");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // an entity that expands into 100,000 nested elements would nest past the scan of the markup
    let nested = format!("<!DOCTYPE d [<!ENTITY e \"{}\">]><d>&e;</d>", "<a>".repeat(100_000));
    expect_invalid(deploy(&mut client, "entity.bpmn", nested.into_bytes()).await, "Entities whose replacement text holds markup");
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_of_thousands_of_faulty_elements_is_rejected_with_a_bounded_message() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    // 30,000 flows that refer to nothing, one per line: 30,000 errors, each with its line
    let flows: String = (0..30_000).map(|i| format!("<bpmn:sequenceFlow id=\"f{i}\" sourceRef=\"x{i}\" targetRef=\"y{i}\" />\n")).collect();
    let xml =
        definitions(&format!(r#"<bpmn:process id="faulty" isExecutable="true"><bpmn:startEvent id="start" />{flows}</bpmn:process>"#));
    let status = deploy(&mut client, "faulty.bpmn", xml.into_bytes()).await.expect_err("rejected");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().len() <= 4_100, "{}", status.message().len());
    assert!(status.message().contains("sourceRef"), "{}", status.message());
    runs_an_instance_end_to_end(&node).await;
}

/// A flat JSON object of `keys` numbered keys (`{"k0":0,"k1":1,...}`).
fn flat_variables(keys: usize) -> String {
    let mut text = String::with_capacity(keys * 14);
    text.push('{');
    for i in 0..keys {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!("\"k{i}\":{i}"));
    }
    text.push('}');
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_with_200000_variables_does_not_hold_the_partition() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;
    let variables = flat_variables(200_000);
    assert!(variables.len() > 2_000_000 && variables.len() < 4_000_000, "{}", variables.len());
    let started = Instant::now();
    let mut request = tonic::Request::new(CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables,
        ..Default::default()
    });
    request.set_timeout(Duration::from_secs(10));
    let created = client.create_process_instance(request).await.expect("the creation is answered");
    eprintln!("a creation of 200,000 variables took {:?}", started.elapsed());
    // the job carries them all
    let mut answers = client.activate_jobs(common::one_task_activation(1)).await.expect("activate").into_inner();
    let job = answers.message().await.expect("stream").expect("a job").jobs.remove(0);
    assert_eq!(job.process_instance_key, created.into_inner().process_instance_key);
    let variables: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&job.variables).expect("JSON");
    assert_eq!((variables.len(), &variables["k199999"]), (200_000, &serde_json::json!(199_999)));
    client.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("complete");
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_and_oversized_variables_and_junk_are_refused() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;
    let create = |variables: String| CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables,
        ..Default::default()
    };
    let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200_000), "]".repeat(200_000));
    let status = client.create_process_instance(create(deep)).await.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let big = format!("{{\"a\":\"{}\"}}", "x".repeat(8 << 20));
    let status = client.create_process_instance(create(big)).await.expect_err("refused");
    assert_ne!(status.code(), Code::Ok);
    runs_an_instance_end_to_end(&node).await;
    let junk: Vec<u8> = (0..20u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let status = deploy(&mut client, "junk.bpmn", junk).await.expect_err("refused");
    assert_ne!(status.code(), Code::Ok);
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_beyond_the_variable_limit_is_rejected_naming_it() {
    let node = Node::start(&["--max-document-variables", "1000"]);
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;
    let create = |variables: String| CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables,
        ..Default::default()
    };
    client.create_process_instance(create(flat_variables(1_000))).await.expect("1,000 variables are within the limit");
    let status = client.create_process_instance(create(flat_variables(1_001))).await.expect_err("1,001 are not");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("it holds 1001 variables, more than the limit of 1000 (max_document_variables)"),
        "{}",
        status.message()
    );
    let request =
        PublishMessageRequest { name: "m".into(), correlation_key: "k".into(), variables: flat_variables(5_000), ..Default::default() };
    let status = client.publish_message(request).await.expect_err("a message's variables count too");
    assert!(status.message().contains("(max_document_variables)"), "{}", status.message());
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_of_thousands_of_processes_is_rejected_naming_the_limit() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    // 40,000 processes in 3 MB: each process's record would carry the whole resource (120 GB)
    let processes: String =
        (0..40_000).map(|i| format!(r#"<process id="p{i}" isExecutable="true"><startEvent id="s{i}"/></process>"#)).collect();
    let xml = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" id="d">{processes}</definitions>"#
    );
    assert!(xml.len() < 4_000_000, "{}", xml.len());
    expect_invalid(deploy(&mut client, "many.bpmn", xml.into_bytes()).await, "(max_deployment_process_bytes)");
    runs_an_instance_end_to_end(&node).await;
    // a hundred small processes in one resource deploy
    let processes: String =
        (0..100).map(|i| format!(r#"<process id="q{i}" isExecutable="true"><startEvent id="s{i}"/></process>"#)).collect();
    let xml = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" id="d">{processes}</definitions>"#
    );
    let deployed = deploy(&mut client, "hundred.bpmn", xml.into_bytes()).await.expect("100 processes deploy");
    assert_eq!(deployed.deployments.len(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feel_values_nested_past_the_limit_at_run_time_are_null() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    // both expressions built values nested 20,000 and 100,000 levels deep, whose drop overflowed the stack
    let outputs = [
        r#"=for i in 1..20000 return if i = 1 then [] else [partial[i - 1]]"#,
        r#"=context put({}, for i in 1..100000 return &quot;a&quot;, 1)"#,
    ];
    let mappings: String =
        outputs.iter().enumerate().map(|(i, source)| format!(r#"<zeebe:output source="{source}" target="v{i}" />"#)).collect();
    let xml = definitions(&format!(
        r#"<bpmn:process id="values" isExecutable="true"><bpmn:startEvent id="start"><bpmn:extensionElements><zeebe:ioMapping>{mappings}</zeebe:ioMapping></bpmn:extensionElements></bpmn:startEvent></bpmn:process>"#
    ));
    deploy(&mut client, "values.bpmn", xml.into_bytes()).await.expect("deploy");
    let request = CreateProcessInstanceWithResultRequest {
        request: Some(CreateProcessInstanceRequest { bpmn_process_id: "values".into(), version: -1, ..Default::default() }),
        request_timeout: 10_000,
        fetch_variables: vec![],
    };
    let result = client.create_process_instance_with_result(request).await.expect("the instance completes").into_inner();
    let variables: serde_json::Value = serde_json::from_str(&result.variables).expect("JSON");
    assert_eq!(variables, serde_json::json!({"v0": null, "v1": null}));
    runs_an_instance_end_to_end(&node).await;
}

/// Expressions whose work grows without bound (nested iterations, a list doubled per element, a
/// quadratic built-in) raise an incident naming FEEL's work limit instead of holding the
/// partition or its memory; the node then runs an instance end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feel_work_beyond_the_limit_raises_an_incident_naming_it() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    let sources = [
        "=for i in 1..1000, j in 1..1000 return for k in 1..1000 return k",
        "=count(for i in 1..60 return if i = 1 then [1] else [partial[i - 1], partial[i - 1]])",
        "=count(distinct values(for i in 1..300000 return i))",
    ];
    let mut instances = Vec::new();
    for (n, source) in sources.iter().enumerate() {
        let id = format!("work{n}");
        let xml = definitions(&format!(
            r#"<bpmn:process id="{id}" isExecutable="true"><bpmn:startEvent id="start"><bpmn:extensionElements><zeebe:ioMapping><zeebe:output source="{source}" target="v" /></zeebe:ioMapping></bpmn:extensionElements></bpmn:startEvent></bpmn:process>"#
        ));
        deploy(&mut client, &format!("{id}.bpmn"), xml.into_bytes()).await.expect("deploy");
        let started = Instant::now();
        let created = client
            .create_process_instance(CreateProcessInstanceRequest { bpmn_process_id: id, version: -1, ..Default::default() })
            .await
            .expect("create")
            .into_inner();
        instances.push((created.process_instance_key, *source, started));
    }
    for (key, source, started) in instances {
        let incident = loop {
            let (status, body) = node.get(&format!("/v1/incidents?processInstanceKey={key}"));
            assert_eq!(status, 200, "{body}");
            let incidents: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            if let Some(found) = incidents["items"].get(0).cloned() {
                break found;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no incident for {source}; log:\n{}", tail(&node));
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let message = incident["errorMessage"].as_str().unwrap_or_default();
        assert!(message.contains("work limit"), "{source}: {incident}");
    }
    runs_an_instance_end_to_end(&node).await;
}

/// Cancelling an instance that holds 200,000 variables deletes them all without holding the
/// partition: the cancellation is answered and an instance then runs end to end within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_instance_of_200000_variables_does_not_hold_the_partition() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;
    let mut request = tonic::Request::new(CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables: flat_variables(200_000),
        ..Default::default()
    });
    request.set_timeout(Duration::from_secs(10));
    let created = client.create_process_instance(request).await.expect("the creation is answered").into_inner();
    let started = Instant::now();
    let mut cancel = tonic::Request::new(CancelProcessInstanceRequest { process_instance_key: created.process_instance_key });
    cancel.set_timeout(Duration::from_secs(10));
    client.cancel_process_instance(cancel).await.expect("the cancellation is answered");
    eprintln!("cancelling an instance of 200,000 variables took {:?}", started.elapsed());
    runs_an_instance_end_to_end(&node).await;
}

/// A parallel multi-instance service task over 10,000 items (activated 500 a batch, over 20
/// batches: `waggle_engine::MI_ACTIVATIONS_PER_BATCH`) with an
/// output collection: its creation does not hold the partition (an instance runs end to end
/// within a second after it), every inner job is activated and completed, and the body completes
/// with all 10,000 results in place (issue 26).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_multi_instance_over_10000_items_runs_to_completion() {
    const ITEMS: usize = 10_000;
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    let xml = definitions(
        r#"<bpmn:process id="mi-wide" isExecutable="true"><bpmn:startEvent id="s"/><bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="t"/>
<bpmn:serviceTask id="t"><bpmn:extensionElements><zeebe:taskDefinition type="wide-item"/></bpmn:extensionElements>
<bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="item" outputCollection="results" outputElement="=item * 2"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>
<bpmn:sequenceFlow id="f2" sourceRef="t" targetRef="e"/><bpmn:endEvent id="e"/></bpmn:process>"#,
    );
    deploy(&mut client, "mi-wide.bpmn", xml.into_bytes()).await.expect("deploy");
    let started = Instant::now();
    let mut creator = client.clone();
    let created = tokio::spawn(async move {
        let request = CreateProcessInstanceWithResultRequest {
            request: Some(CreateProcessInstanceRequest {
                bpmn_process_id: "mi-wide".into(),
                version: -1,
                variables: format!(r#"{{"n": {ITEMS}}}"#),
                ..Default::default()
            }),
            request_timeout: 300_000,
            fetch_variables: vec!["results".into()],
        };
        creator.create_process_instance_with_result(request).await
    });
    runs_an_instance_end_to_end(&node).await;
    let mut completed = 0;
    while completed < ITEMS {
        let activation = ActivateJobsRequest {
            r#type: "wide-item".into(),
            worker: "w".into(),
            timeout: 300_000,
            max_jobs_to_activate: 1_000,
            request_timeout: 1_000,
            ..Default::default()
        };
        let mut answers = client.activate_jobs(activation).await.expect("activate").into_inner();
        while let Some(batch) = answers.message().await.expect("activation stream") {
            for job in batch.jobs {
                client.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("complete");
                completed += 1;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(240), "{completed} of {ITEMS} jobs completed; log:\n{}", tail(&node));
    }
    let result = created.await.expect("creator task").expect("the instance's result").into_inner();
    let results: serde_json::Value = serde_json::from_str(&result.variables).expect("JSON");
    let results = results["results"].as_array().expect("results");
    assert_eq!(results.len(), ITEMS);
    assert!(results.iter().enumerate().all(|(i, r)| r.as_u64() == Some(2 * (i as u64 + 1))), "results out of place");
    println!("{ITEMS} inner instances created, completed and collected in {:?}", started.elapsed());
    runs_an_instance_end_to_end(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_calling_itself_from_nested_subprocesses_stops_and_cancels() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    // each level: 20 nested subprocesses, and in the innermost a call activity calling the process
    // again; the recursion stops at the depth limit (1,000 levels, 21,000 nested scopes in all)
    let task = r#"<serviceTask id="t"><extensionElements><zeebe:taskDefinition type="deep-task"/></extensionElements></serviceTask>"#;
    let call = r#"<callActivity id="t"><extensionElements><zeebe:calledElement processId="deep" propagateAllParentVariables="false"/></extensionElements></callActivity>"#;
    let model = nested_subprocesses(20, true).replace(task, call);
    deploy(&mut client, "recursive.bpmn", model.into_bytes()).await.expect("a process calling itself deploys");
    let started = Instant::now();
    let created = client
        .create_process_instance(CreateProcessInstanceRequest { bpmn_process_id: "deep".into(), version: -1, ..Default::default() })
        .await
        .expect("the recursion is bounded")
        .into_inner();
    client
        .cancel_process_instance(CancelProcessInstanceRequest { process_instance_key: created.process_instance_key })
        .await
        .expect("cancel terminates every level");
    eprintln!("recursion to the depth limit and its cancellation took {:?}", started.elapsed());
    runs_an_instance_end_to_end(&node).await;
}
