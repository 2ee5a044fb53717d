//! gRPC requests: the first byte picks one of the gateway's 21 RPCs, the rest is decoded as that
//! RPC's request message (protobuf, as tonic decodes a request's bytes) and handed to the real
//! gateway handler over a real broker in the process (`waggle_fuzz::node`): validation, routing,
//! the engine's processing and the answer. Property: no panic anywhere in the node (libFuzzer's
//! panic hook aborts on a panic in any thread), no hang, bounded memory.
#![no_main]

use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use waggle_fuzz::{node, CALL_LIMIT};
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway;

/// Decodes the request and calls the handler; a message that is not valid protobuf for the
/// request type is refused by tonic before any handler, as here.
macro_rules! call {
    ($gateway:expr, $bytes:expr, $method:ident, $request:ty) => {
        match <$request>::decode($bytes) {
            Ok(request) => {
                let answer = $gateway.$method(tonic::Request::new(request)).await;
                if std::env::var_os("WAGGLE_FUZZ_DEBUG").is_some() {
                    eprintln!(
                        "{}: {:?}",
                        stringify!($method),
                        answer.as_ref().map(|_| ()).map_err(|s| (s.code(), s.message().to_string()))
                    );
                }
            }
            Err(_) => {}
        }
    };
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let node = node();
    let gateway = node.gateway.clone();
    node.runtime.block_on(async move {
        let call = async {
            match selector % 21 {
                0 => {
                    if let Ok(mut r) = pb::ActivateJobsRequest::decode(bytes) {
                        // a long poll waits as long as the client asks: bounded here by CALL_LIMIT
                        r.request_timeout = r.request_timeout.clamp(-1, 200);
                        if let Ok(answer) = gateway.activate_jobs(tonic::Request::new(r)).await {
                            let mut stream = answer.into_inner();
                            while stream.next().await.is_some() {}
                        }
                    }
                }
                1 => {
                    if let Ok(r) = pb::StreamActivatedJobsRequest::decode(bytes) {
                        // the stream opens and closes again at once
                        let _ = gateway.stream_activated_jobs(tonic::Request::new(r)).await;
                    }
                }
                2 => call!(gateway, bytes, cancel_process_instance, pb::CancelProcessInstanceRequest),
                3 => call!(gateway, bytes, complete_job, pb::CompleteJobRequest),
                4 => call!(gateway, bytes, create_process_instance, pb::CreateProcessInstanceRequest),
                5 => {
                    if let Ok(mut r) = pb::CreateProcessInstanceWithResultRequest::decode(bytes) {
                        r.request_timeout = r.request_timeout.clamp(-1, 200);
                        let _ = gateway.create_process_instance_with_result(tonic::Request::new(r)).await;
                    }
                }
                6 => call!(gateway, bytes, evaluate_decision, pb::EvaluateDecisionRequest),
                7 => call!(gateway, bytes, deploy_process, pb::DeployProcessRequest),
                8 => call!(gateway, bytes, deploy_resource, pb::DeployResourceRequest),
                9 => call!(gateway, bytes, fail_job, pb::FailJobRequest),
                10 => call!(gateway, bytes, throw_error, pb::ThrowErrorRequest),
                11 => call!(gateway, bytes, publish_message, pb::PublishMessageRequest),
                12 => call!(gateway, bytes, resolve_incident, pb::ResolveIncidentRequest),
                13 => call!(gateway, bytes, set_variables, pb::SetVariablesRequest),
                14 => call!(gateway, bytes, topology, pb::TopologyRequest),
                15 => call!(gateway, bytes, update_job_retries, pb::UpdateJobRetriesRequest),
                16 => call!(gateway, bytes, modify_process_instance, pb::ModifyProcessInstanceRequest),
                17 => call!(gateway, bytes, migrate_process_instance, pb::MigrateProcessInstanceRequest),
                18 => call!(gateway, bytes, update_job_timeout, pb::UpdateJobTimeoutRequest),
                19 => {
                    call!(gateway, bytes, delete_resource, pb::DeleteResourceRequest);
                    // what later inputs reach stays deployed
                    let _ = node.deploy_seeds().await;
                }
                _ => call!(gateway, bytes, broadcast_signal, pb::BroadcastSignalRequest),
            }
        };
        let _ = tokio::time::timeout(CALL_LIMIT, call).await;
    });
});
