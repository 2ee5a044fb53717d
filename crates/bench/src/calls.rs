//! The load generator's per-instance calls (CreateProcessInstance, PublishMessage, CompleteJob)
//! and its job stream (StreamActivatedJobs), as plain gRPC on the bench's own HTTP/2 client
//! ([`crate::http2`]).
//!
//! The bench shares the machine with the server it measures, so its own CPU per instance is taken
//! from the server's. tonic's client runs each call through a tower buffer (a task hop), hyper's
//! client task and a body-piping task per request, on the `h2` crate's per-stream machinery; here
//! a call is a precomputed header block and one message on a stream, and its answer one message
//! and `grpc-status` trailers. What goes on the wire is what gRPC specifies, so it drives any
//! server of the protocol alike (it drove Zeebe 8.5.8 too, while that was run here). Everything else the bench does uses tonic ([`crate::client`]).

// A failed call is answered with tonic's `Status`, as the tonic calls beside these are: boxing it
// would only add an allocation on the error path.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use anyhow::Context;
use prost::Message;
use tonic::{Code, Status};
use waggle_protocol::gateway::{
    ActivatedJob, CompleteJobRequest, CompleteJobResponse, CreateProcessInstanceRequest, CreateProcessInstanceResponse,
    PublishMessageRequest, PublishMessageResponse, StreamActivatedJobsRequest,
};
use waggle_protocol::grpc_frame;

use crate::http2::{self, Connection, MessageStream, Method};

/// One HTTP/2 connection for the per-instance calls; clones share it.
#[derive(Clone)]
pub struct CallClient {
    connection: Connection,
    methods: Arc<Methods>,
}

struct Methods {
    create: Method,
    publish: Method,
    complete: Method,
    stream_jobs: Method,
}

/// Opens the connection to `address` (`host:port`); tasks of the current runtime drive it.
pub async fn connect(address: &str) -> anyhow::Result<CallClient> {
    let connection = http2::connect(address).await.with_context(|| format!("connecting to {address}"))?;
    let method = |name: &str| connection.method(&format!("/gateway_protocol.Gateway/{name}"));
    let methods = Methods {
        create: method("CreateProcessInstance"),
        publish: method("PublishMessage"),
        complete: method("CompleteJob"),
        stream_jobs: method("StreamActivatedJobs"),
    };
    Ok(CallClient { connection, methods: Arc::new(methods) })
}

impl CallClient {
    pub async fn create_process_instance(&self, request: &CreateProcessInstanceRequest) -> Result<CreateProcessInstanceResponse, Status> {
        self.call(&self.methods.create, request).await
    }

    pub async fn publish_message(&self, request: &PublishMessageRequest) -> Result<PublishMessageResponse, Status> {
        self.call(&self.methods.publish, request).await
    }

    pub async fn complete_job(&self, request: &CompleteJobRequest) -> Result<CompleteJobResponse, Status> {
        self.call(&self.methods.complete, request).await
    }

    /// Opens a job stream; the jobs arrive as [`JobStream::next`] returns them.
    pub fn stream_activated_jobs(&self, request: &StreamActivatedJobsRequest) -> JobStream {
        JobStream(self.connection.server_stream(&self.methods.stream_jobs, grpc_frame::frame(request)))
    }

    async fn call<Req: Message, Resp: Message + Default>(&self, method: &Method, request: &Req) -> Result<Resp, Status> {
        let answer = self.connection.unary(method, grpc_frame::frame(request)).await?;
        decode(&answer)
    }
}

/// The jobs pushed on one StreamActivatedJobs call. Dropping it cancels the call.
pub struct JobStream(MessageStream);

impl JobStream {
    /// The next job; `None` once the server ended the stream without error.
    pub async fn next(&mut self) -> Option<Result<ActivatedJob, Status>> {
        Some(self.0.next().await?.and_then(|m| decode(&m)))
    }
}

fn decode<M: Message + Default>(message: &[u8]) -> Result<M, Status> {
    M::decode(message).map_err(|e| Status::new(Code::Internal, format!("answer does not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_decode_and_garbage_is_an_error() {
        let request = CompleteJobRequest { job_key: 42, variables: "{\"a\":1}".into() };
        let back: CompleteJobRequest = decode(&request.encode_to_vec()).unwrap();
        assert_eq!(back, request);
        assert_eq!(decode::<CompleteJobRequest>(&[0x0a, 0x05, b'x']).unwrap_err().code(), Code::Internal);
    }
}
