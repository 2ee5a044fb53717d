//! The load generator's per-instance calls (CreateProcessInstance, PublishMessage, CompleteJob)
//! as plain gRPC over HTTP/2, on the `h2` crate.
//!
//! The bench shares the machine with the server it measures, so its own CPU per instance is taken
//! from the server's. tonic's client runs each call through a tower buffer (a task hop), hyper's
//! client task and a body-piping task per request; here a call is one HTTP/2 stream sent from
//! the calling task: headers and one length-prefixed message, then the answer's message and
//! `grpc-status` trailers read back. What goes on the wire is what gRPC specifies, so it drives
//! Waggle and the real Zeebe alike. Everything else the bench does uses tonic ([`crate::client`]).

// A failed call is answered with tonic's `Status`, as the tonic calls beside these are: boxing it
// would only add an allocation on the error path.
#![allow(clippy::result_large_err)]

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;
use http::{HeaderValue, Method, Uri};
use prost::Message;
use tonic::{Code, Status};
use waggle_protocol::gateway::{
    CompleteJobRequest, CompleteJobResponse, CreateProcessInstanceRequest, CreateProcessInstanceResponse, PublishMessageRequest,
    PublishMessageResponse,
};
use waggle_protocol::grpc_frame;

/// Flow-control windows as tonic's client (hyper's defaults) opens them.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
/// Largest answer accepted (as the tonic client's decoding limit in [`crate::client`]).
const MAX_ANSWER: usize = 64 << 20;

/// One HTTP/2 connection for the per-instance calls; clones share it.
#[derive(Clone)]
pub struct UnaryClient {
    send: SendRequest<Bytes>,
    create: Uri,
    publish: Uri,
    complete: Uri,
}

/// Opens the connection to `address` (`host:port`); a task of the current runtime drives it.
pub async fn connect(address: &str) -> anyhow::Result<UnaryClient> {
    let tcp = tokio::net::TcpStream::connect(address).await.with_context(|| format!("connecting to {address}"))?;
    tcp.set_nodelay(true)?;
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake::<_, Bytes>(tcp)
        .await
        .with_context(|| format!("HTTP/2 handshake with {address}"))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("bench: HTTP/2 connection ended: {e}");
        }
    });
    let uri = |method: &str| Uri::try_from(format!("http://{address}/gateway_protocol.Gateway/{method}"));
    Ok(UnaryClient { send, create: uri("CreateProcessInstance")?, publish: uri("PublishMessage")?, complete: uri("CompleteJob")? })
}

impl UnaryClient {
    pub async fn create_process_instance(&self, request: &CreateProcessInstanceRequest) -> Result<CreateProcessInstanceResponse, Status> {
        self.call(&self.create, request).await
    }

    pub async fn publish_message(&self, request: &PublishMessageRequest) -> Result<PublishMessageResponse, Status> {
        self.call(&self.publish, request).await
    }

    pub async fn complete_job(&self, request: &CompleteJobRequest) -> Result<CompleteJobResponse, Status> {
        self.call(&self.complete, request).await
    }

    async fn call<Req: Message, Resp: Message + Default>(&self, uri: &Uri, request: &Req) -> Result<Resp, Status> {
        let mut send = self.send.clone().ready().await.map_err(transport)?;
        let mut head = http::Request::new(());
        *head.method_mut() = Method::POST;
        *head.uri_mut() = uri.clone();
        let headers = head.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
        let (answer, mut body) = send.send_request(head, false).map_err(transport)?;
        body.send_data(grpc_frame::frame(request), true).map_err(transport)?;

        let (parts, mut answer) = answer.await.map_err(transport)?.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(Status::new(Code::Unknown, format!("HTTP status {}", parts.status)));
        }
        // a trailers-only answer carries the status in its headers
        if let Some(status) = Status::from_header_map(&parts.headers) {
            if status.code() != Code::Ok {
                return Err(status);
            }
        }
        let mut message = BytesMut::new();
        while let Some(chunk) = answer.data().await {
            let chunk = chunk.map_err(transport)?;
            let _ = answer.flow_control().release_capacity(chunk.len());
            message.extend_from_slice(&chunk);
            if message.len() > MAX_ANSWER + grpc_frame::PREFIX_BYTES {
                return Err(Status::new(Code::OutOfRange, "answer larger than the bench accepts"));
            }
        }
        let trailers = answer.trailers().await.map_err(transport)?;
        match trailers.as_ref().and_then(Status::from_header_map) {
            Some(status) if status.code() != Code::Ok => return Err(status),
            Some(_) => {}
            None if parts.headers.contains_key(Status::GRPC_STATUS) => {}
            None => return Err(Status::new(Code::Internal, "answer without grpc-status")),
        }
        unframe(&message)
    }
}

fn transport(e: h2::Error) -> Status {
    Status::new(Code::Unavailable, format!("HTTP/2: {e}"))
}

/// The one uncompressed message of an answer.
fn unframe<M: Message + Default>(body: &[u8]) -> Result<M, Status> {
    match grpc_frame::single(body) {
        Some((false, message)) => M::decode(message).map_err(|e| Status::new(Code::Internal, format!("answer does not decode: {e}"))),
        Some((true, _)) => Err(Status::new(Code::Internal, "compressed answer (the bench asks for none)")),
        None if body.is_empty() => Err(Status::new(Code::Internal, "answer without a message")),
        None => Err(Status::new(Code::Internal, "malformed gRPC answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trip() {
        let request = CompleteJobRequest { job_key: 42, variables: "{\"a\":1}".into() };
        let back: CompleteJobRequest = unframe(&grpc_frame::frame(&request)).unwrap();
        assert_eq!(back, request);
        let empty: CompleteJobResponse = unframe(&grpc_frame::frame(&CompleteJobResponse {})).unwrap();
        assert_eq!(empty, CompleteJobResponse {});
    }

    #[test]
    fn malformed_answers_are_errors() {
        let framed = grpc_frame::frame(&CompleteJobRequest { job_key: 42, variables: String::new() });
        assert!(unframe::<CompleteJobRequest>(&[]).is_err());
        assert!(unframe::<CompleteJobRequest>(&framed[..framed.len() - 1]).is_err(), "truncated");
        let mut longer = framed.to_vec();
        longer.push(0);
        assert!(unframe::<CompleteJobRequest>(&longer).is_err(), "trailing bytes");
        let mut compressed = framed.to_vec();
        compressed[0] = 1;
        assert_eq!(unframe::<CompleteJobRequest>(&compressed).unwrap_err().code(), Code::Internal);
    }
}
