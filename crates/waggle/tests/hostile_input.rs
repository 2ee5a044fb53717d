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

/// `body` sent to the REST port with `method` on another thread (the blocking HTTP/1.0 client).
async fn rest(node: &Node, method: &'static str, path: &'static str, body: String) -> (u16, String) {
    let port = node.rest_port;
    tokio::task::spawn_blocking(move || common::http_json(port, method, path, &body)).await.expect("client").expect("an answer")
}

/// JSON nested `depth` deep, alternating arrays and objects, around `1`.
fn nested_json(depth: usize) -> String {
    let (open, close): (String, String) = (0..depth).map(|i| if i % 2 == 0 { ("[", "]") } else { ("{\"a\":", "}") }).unzip();
    format!("{open}1{close}")
}

/// Deeply nested JSON in REST bodies (creations, searches, messages, job completion, decision
/// evaluation, variable updates) and in gRPC variable documents (every call that takes one) is
/// refused with 400 / INVALID_ARGUMENT; nothing overflows the stack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_json_in_rest_bodies_and_grpc_documents_is_refused() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    deploy_one_task(&mut client).await;
    let deep = nested_json(100_000);
    let bodies: [(&'static str, &'static str, String); 7] = [
        ("POST", "/v2/process-instances", format!(r#"{{"processDefinitionId":"benchmark","variables":{{"v":{deep}}}}}"#)),
        ("POST", "/v2/process-instances/search", format!(r#"{{"filter":{deep}}}"#)),
        ("POST", "/v2/messages/publication", format!(r#"{{"name":"m","correlationKey":"k","variables":{{"v":{deep}}}}}"#)),
        ("POST", "/v2/jobs/2251799813685249/completion", format!(r#"{{"variables":{{"v":{deep}}}}}"#)),
        ("POST", "/v2/decision-definitions/evaluation", format!(r#"{{"decisionDefinitionId":"d","variables":{{"v":{deep}}}}}"#)),
        ("PUT", "/v2/element-instances/2251799813685249/variables", format!(r#"{{"variables":{{"v":{deep}}}}}"#)),
        ("POST", "/v2/signals/broadcast", deep.clone()),
    ];
    for (method, path, body) in bodies {
        let (status, answer) = rest(&node, method, path, body).await;
        assert_eq!(status, 400, "{method} {path}: {answer}");
    }
    let document = format!(r#"{{"v":{deep}}}"#);
    let invalid = |what: &str, result: Result<(), tonic::Status>| {
        let status = result.expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    };
    let create = CreateProcessInstanceRequest {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables: document.clone(),
        ..Default::default()
    };
    invalid("create", client.create_process_instance(create).await.map(drop));
    let publish =
        PublishMessageRequest { name: "m".into(), correlation_key: "k".into(), variables: document.clone(), ..Default::default() };
    invalid("publish", client.publish_message(publish).await.map(drop));
    invalid("complete", client.complete_job(CompleteJobRequest { job_key: 2251799813685249, variables: document.clone() }).await.map(drop));
    let set = SetVariablesRequest { element_instance_key: 2251799813685249, variables: document.clone(), local: false };
    invalid("set variables", client.set_variables(set).await.map(drop));
    let evaluate = EvaluateDecisionRequest { decision_id: "d".into(), variables: document.clone(), ..Default::default() };
    invalid("evaluate", client.evaluate_decision(evaluate).await.map(drop));
    let signal = BroadcastSignalRequest { signal_name: "s".into(), variables: document, ..Default::default() };
    invalid("signal", client.broadcast_signal(signal).await.map(drop));
    runs_an_instance_end_to_end(&node).await;
}

/// DMN as BPMN: an entity bomb, markup in entities and elements nested 50,000 deep are
/// INVALID_ARGUMENT, in a DMN resource as in a BPMN one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dmn_entity_bombs_and_deep_nesting_are_rejected() {
    let node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    let mut entities = String::from("<!ENTITY lol0 \"lol\">");
    for i in 1..10 {
        entities.push_str(&format!("<!ENTITY lol{i} \"{}\">", format!("&lol{};", i - 1).repeat(10)));
    }
    let dmn = |doctype: &str, body: &str| {
        format!(
            r#"<?xml version="1.0"?>{doctype}<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="drg" name="D" namespace="n"><decision id="d" name="D"><literalExpression><text>{body}</text></literalExpression></decision></definitions>"#
        )
    };
    let cases = [
        ("bomb.dmn", dmn(&format!("<!DOCTYPE definitions [{entities}]>"), "&lol9;")),
        ("markup.dmn", dmn(&format!("<!DOCTYPE definitions [<!ENTITY e \"{}\">]>", "<a>".repeat(100_000)), "&e;")),
        ("deep.dmn", dmn("", &format!("{}1{}", "<x>".repeat(50_000), "</x>".repeat(50_000)))),
        ("external.dmn", dmn("<!DOCTYPE definitions [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>", "&x;")),
    ];
    for (name, content) in cases {
        let status = deploy(&mut client, name, content.into_bytes()).await.expect_err(name);
        assert_eq!(status.code(), Code::InvalidArgument, "{name}: {status:?}");
        assert!(!status.message().contains("root:"), "{name}: {}", status.message());
    }
    runs_an_instance_end_to_end(&node).await;
}

/// Malformed HTTP/2 on the gRPC port: each case on a connection of its own ends that connection
/// with a GOAWAY naming the error (the `h2` crate's choice: PROTOCOL_ERROR where RFC 9113 would
/// also allow FRAME_SIZE_ERROR or COMPRESSION_ERROR), or a close; the node goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_http2_frames_end_their_connection_and_the_node_goes_on() {
    use common::raw_h2::{frame, frame_claiming, grpc_headers, kind, reason, Ending, RawFrames, END_HEADERS};
    let node = Node::start(&[]);
    let address = node.address();
    let headers = grpc_headers("Topology");
    let cases: Vec<(&str, Vec<u8>, Ending)> = vec![
        ("DATA on stream 0", frame(kind::DATA, 0, 0, b"x"), Ending::GoAway(reason::PROTOCOL_ERROR)),
        ("SETTINGS of 5 bytes", frame(kind::SETTINGS, 0, 0, &[0, 1, 0, 0, 0]), Ending::GoAway(reason::PROTOCOL_ERROR)),
        ("a frame claiming 16 MiB", frame_claiming(0xff_ffff, kind::DATA, 0, 1, &[0; 64]), Ending::GoAway(reason::FRAME_SIZE_ERROR)),
        ("HEADERS of junk HPACK", frame(kind::HEADERS, END_HEADERS, 1, &[0xff; 32]), Ending::GoAway(reason::PROTOCOL_ERROR)),
        ("WINDOW_UPDATE of 0", frame(kind::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]), Ending::GoAway(reason::PROTOCOL_ERROR)),
        ("PING of 7 bytes", frame(kind::PING, 0, 0, &[0; 7]), Ending::GoAway(reason::PROTOCOL_ERROR)),
        ("HEADERS on an even stream", frame(kind::HEADERS, END_HEADERS, 2, &headers), Ending::GoAway(reason::PROTOCOL_ERROR)),
        ("CONTINUATION without HEADERS", frame(kind::CONTINUATION, END_HEADERS, 1, &headers), Ending::GoAway(reason::PROTOCOL_ERROR)),
        ("RST_STREAM on an idle stream", frame(kind::RST_STREAM, 0, 9, &[0, 0, 0, 8]), Ending::GoAway(reason::PROTOCOL_ERROR)),
    ];
    let mut endings = Vec::new();
    for (what, bytes, expected) in cases {
        let mut connection = RawFrames::connect(&address).await;
        connection.send(&bytes).await.expect(what);
        let ending = connection.ending(Duration::from_secs(2)).await;
        endings.push((what, ending, expected));
    }
    assert!(endings.iter().all(|(_, ending, expected)| ending == expected), "{endings:#?}");
    // not HTTP/2 at all: closed
    let mut connection = RawFrames::connect_bare(&address).await;
    connection.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("HTTP/1.1");
    assert_ne!(connection.ending(Duration::from_secs(2)).await, Ending::Open, "HTTP/1.1 on the gRPC port");
    runs_an_instance_end_to_end(&node).await;
}

/// Floods on the gRPC port, each on a connection of its own that never reads: 20,000 streams
/// opened and reset at once ("rapid reset", CVE-2023-44487), 100,000 SETTINGS and 100,000 PING
/// frames, a header block of endless CONTINUATION frames (CVE-2024-27316), and headers over the
/// 16 KiB limit. Each is refused or absorbed with the node's memory bounded (its resident set
/// grows by less than 64 MiB), and other clients are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_of_resets_settings_pings_and_continuations_are_bounded() {
    use common::raw_h2::{encode_literal_block, frame, grpc_headers, kind, reason, rss_kib, Ending, RawFrames, END_HEADERS};
    let node = Node::start(&[]);
    let pid = node.pid().expect("running");
    let address = node.address();
    runs_an_instance_end_to_end(&node).await;
    let before = rss_kib(pid);
    let grown = |what: &str| {
        let grown = rss_kib(pid).saturating_sub(before);
        assert!(grown < 64 * 1024, "{what}: the node grew by {grown} KiB");
    };
    // rapid reset: HEADERS then RST_STREAM(CANCEL), 20,000 times, in batches
    let mut flood = RawFrames::connect(&address).await;
    let headers = grpc_headers("Topology");
    let mut stream = 1u32;
    'flood: for _ in 0..40 {
        let mut batch = Vec::new();
        for _ in 0..500 {
            batch.extend(frame(kind::HEADERS, END_HEADERS, stream, &headers));
            batch.extend(frame(kind::RST_STREAM, 0, stream, &[0, 0, 0, 8]));
            stream += 2;
        }
        if flood.send(&batch).await.is_err() {
            break 'flood;
        }
    }
    let ending = flood.ending(Duration::from_secs(2)).await;
    assert_eq!(ending, Ending::GoAway(reason::ENHANCE_YOUR_CALM), "rapid reset");
    grown("rapid reset");
    runs_an_instance_end_to_end(&node).await;
    // SETTINGS and PING floods, never reading the server's ACKs
    for (what, one) in [("SETTINGS", frame(kind::SETTINGS, 0, 0, &[])), ("PING", frame(kind::PING, 0, 0, &[7; 8]))] {
        let mut flood = RawFrames::connect(&address).await;
        let batch = one.repeat(1_000);
        let mut sent = 0;
        for _ in 0..100 {
            match tokio::time::timeout(Duration::from_secs(2), flood.send(&batch)).await {
                Ok(Ok(())) => sent += 1_000,
                // the server stops reading until its answers are read (bounded) or closes
                _ => break,
            }
        }
        println!("{what} flood: {sent} frames written");
        grown(what);
        runs_an_instance_end_to_end(&node).await;
        drop(flood);
    }
    // endless CONTINUATION: a header block that never ends, 16 KiB at a time, up to 160 MiB
    let mut flood = RawFrames::connect(&address).await;
    flood.send(&frame(kind::HEADERS, 0, 1, &headers)).await.expect("headers");
    let filler = encode_literal_block(&[("x-filler", &"a".repeat(16_000))]);
    let mut written = 0usize;
    for _ in 0..10_000 {
        match tokio::time::timeout(Duration::from_secs(2), flood.send(&frame(kind::CONTINUATION, 0, 1, &filler))).await {
            Ok(Ok(())) => written += filler.len(),
            _ => break,
        }
    }
    let ending = flood.ending(Duration::from_secs(2)).await;
    assert!(written < 10_000 * filler.len(), "the whole endless header block was taken ({written} bytes)");
    assert_ne!(ending, Ending::Open, "endless CONTINUATION: {written} bytes written");
    println!("endless CONTINUATION: {ending:?} after {written} bytes");
    grown("CONTINUATION");
    // headers over the limit (16 KiB): the stream is refused, the connection goes on
    let mut big = RawFrames::connect(&address).await;
    let over = encode_literal_block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/gateway_protocol.Gateway/Topology"),
        ("x-big", &"b".repeat(15_000)),
    ]);
    let more = encode_literal_block(&[("x-more", &"c".repeat(15_000))]);
    big.send(&frame(kind::HEADERS, 0, 1, &over)).await.expect("headers");
    big.send(&frame(kind::CONTINUATION, END_HEADERS, 1, &more)).await.expect("continuation");
    let ending = big.ending(Duration::from_secs(2)).await;
    println!("headers over the limit: {ending:?}, resets {:?}, answers {}", big.resets, big.headers);
    assert!(ending != Ending::Open || !big.resets.is_empty() || big.headers > 0, "headers over the limit went unanswered");
    grown("headers over the limit");
    runs_an_instance_end_to_end(&node).await;
}

/// Waits until process `pid` holds at most `most` file descriptors; false if it still holds
/// more after `within`.
async fn fds_fall_to(pid: u32, most: usize, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while common::raw_h2::open_fds(pid) > most {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

/// Slow clients on the gRPC port: 200 connections that never send HTTP/2's preface are closed
/// after the handshake limit (10 s); 100 calls whose request body never comes stay open while
/// their client does (as with Zeebe's gateway) and are freed when it goes. Other clients run
/// instances meanwhile, and afterwards the node holds no more sockets than before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_grpc_clients_are_bounded_and_leave_nothing_behind() {
    use common::raw_h2::{frame, grpc_headers, kind, open_fds, Ending, RawFrames, END_HEADERS};
    let node = Node::start(&[]);
    let pid = node.pid().expect("running");
    runs_an_instance_end_to_end(&node).await;
    let baseline = open_fds(pid);
    let address = node.address();
    let started = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..200 {
        silent.push(RawFrames::connect_bare(&address).await);
    }
    let mut holding = Vec::new();
    for _ in 0..100 {
        let mut c = RawFrames::connect(&address).await;
        c.send(&frame(kind::HEADERS, END_HEADERS, 1, &grpc_headers("CompleteJob"))).await.expect("headers");
        holding.push(c);
    }
    let taken = Instant::now();
    while open_fds(pid) < baseline + 290 {
        assert!(taken.elapsed() < Duration::from_secs(5), "the node took {} of 300 connections", open_fds(pid) - baseline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    runs_an_instance_end_to_end(&node).await;
    for c in &mut silent {
        let ending = c.ending(Duration::from_secs(15).saturating_sub(started.elapsed())).await;
        assert_eq!(ending, Ending::Closed, "a connection without a preface after {:?}", started.elapsed());
    }
    assert!(started.elapsed() >= Duration::from_secs(9), "closed before the handshake limit");
    for c in &mut holding {
        assert_eq!(c.ending(Duration::from_millis(10)).await, Ending::Open, "a call waiting for its body");
    }
    runs_an_instance_end_to_end(&node).await;
    drop(silent);
    drop(holding);
    assert!(fds_fall_to(pid, baseline + 4, Duration::from_secs(5)).await, "{} descriptors, {baseline} before", open_fds(pid));
    runs_an_instance_end_to_end(&node).await;
}

/// Slow clients on the REST port: 200 connections sending a request's head a byte at a time
/// (slowloris) are answered 408 and closed after the header read limit (10 s); 50 requests whose
/// body never comes are held while their client is there and freed when it goes. Other clients
/// are answered meanwhile, and afterwards the node holds no more sockets than before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_rest_clients_are_bounded_and_leave_nothing_behind() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let node = Node::start(&[]);
    let pid = node.pid().expect("running");
    let port = node.rest_port;
    assert_eq!(common::http_get(port, "/v2/topology").expect("topology").0, 200);
    let baseline = common::raw_h2::open_fds(pid);
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..200 {
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        c.write_all(b"POST /v2/process-instances HTTP/1.1\r\nHost: x\r\n").await.expect("head");
        slow.push(c);
    }
    let mut bodiless = Vec::new();
    for _ in 0..50 {
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        c.write_all(b"POST /v2/process-instances HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
            .await
            .expect("head");
        bodiless.push(c);
    }
    // a header line a byte every second, while others are answered
    let mut answered = Vec::new();
    while started.elapsed() < Duration::from_secs(8) {
        for c in &mut slow {
            let _ = c.write_all(b"X").await;
        }
        let asked = Instant::now();
        let (status, _) = tokio::task::spawn_blocking(move || common::http_get(port, "/v2/topology")).await.unwrap().expect("an answer");
        assert_eq!(status, 200);
        answered.push(asked.elapsed());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(answered.iter().all(|d| *d < Duration::from_secs(1)), "others waited: {answered:?}");
    for c in &mut slow {
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(15).saturating_sub(started.elapsed()), c.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "a slow client still held after {:?}", started.elapsed());
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    assert!(started.elapsed() >= Duration::from_secs(9), "cut before the header read limit");
    drop(slow);
    drop(bodiless);
    assert!(
        fds_fall_to(pid, baseline + 4, Duration::from_secs(5)).await,
        "{} descriptors, {baseline} before",
        common::raw_h2::open_fds(pid)
    );
    runs_an_instance_end_to_end(&node).await;
}
