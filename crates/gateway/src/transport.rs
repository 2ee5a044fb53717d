//! The gRPC server's HTTP/2 connections, on the `h2` crate, with the hot unary calls answered
//! directly.
//!
//! tonic's own server runs every call through hyper's per-stream task, an axum router, tower
//! layers and a streaming codec: under W2 that glue took most of the gateway thread, and the
//! gateway's own code ~10 % of it. Here each connection is an `h2` server connection whose
//! streams are handled by one task each:
//! - a call in [`FastCall`] whose request is one uncompressed message (no `grpc-encoding`, and no
//!   gzip in `grpc-accept-encoding`, since tonic answers those compressed) is decoded here,
//!   answered by the same [`Gateway`] method, and its answer written as tonic writes it: headers
//!   with `content-type: application/grpc`, one message, `grpc-status: 0` trailers; an error is a
//!   trailers-only response (`Status::into_http`);
//! - anything else (streams, other methods, compressed or malformed requests) goes to the tonic
//!   service ([`GatewayServer`]), its body fed from the stream (or from the bytes already read)
//!   and its answer piped back as hyper pipes it.
//!
//! Message size: a request message over `max_message_bytes` is RESOURCE_EXHAUSTED "gRPC message
//! exceeds maximum size <limit>: <size>", as Zeebe's gateway (grpc-java) answers, at any size
//! (tonic's own error past its decoding limit is rewritten to it); a gzip request is inflated
//! here, at most to the limit (tonic would inflate without bound: a small gzip bomb would take
//! gigabytes), and handed to tonic uncompressed.
//!
//! Authentication: with an [`Authenticator`], every call's headers are checked first (a refusal
//! is a trailers-only answer) and the [`Caller`] goes into its extensions on both paths.
//!
//! As with hyper, a call whose client resets its stream is dropped (a long poll gives up), and
//! `grpc-timeout` bounds every call's answer as tonic's timeout layer did (CANCELLED, "Timeout
//! expired").

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame};
use prost::Message;
use tonic::codegen::Service;
use tonic::{Request, Status};
use waggle_protocol::gateway::gateway_server::{Gateway, GatewayServer};
use waggle_protocol::grpc_frame;

use crate::{Authenticator, Caller, GatewayService};

/// HTTP/2 settings as tonic's server (hyper's defaults) had them.
const WINDOW: u32 = 1024 * 1024;
const MAX_FRAME: u32 = 16 * 1024;
const MAX_HEADER_LIST: u32 = 16 * 1024;
const MAX_SEND_BUFFER: usize = 400 * 1024;
const MAX_LOCAL_ERROR_RESETS: usize = 1024;
/// How long a new connection may take to send HTTP/2's preface and first SETTINGS: one that
/// opens and sends nothing (a slowloris client) is closed then instead of being held forever.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// The unary calls answered without tonic: the ones a running workload makes per instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FastCall {
    CreateProcessInstance,
    CompleteJob,
    FailJob,
    PublishMessage,
}

impl FastCall {
    fn from_path(path: &str) -> Option<Self> {
        match path.strip_prefix("/gateway_protocol.Gateway/")? {
            "CreateProcessInstance" => Some(Self::CreateProcessInstance),
            "CompleteJob" => Some(Self::CompleteJob),
            "FailJob" => Some(Self::FailJob),
            "PublishMessage" => Some(Self::PublishMessage),
            _ => None,
        }
    }
}

/// Serves the gateway's gRPC connections.
#[derive(Clone)]
pub struct GrpcServer {
    gateway: Arc<GatewayService>,
    tonic: GatewayServer<GatewayService>,
    /// Checks every call's credentials first, when authentication is on.
    authenticator: Option<Arc<dyn Authenticator>>,
}

impl GrpcServer {
    pub fn new(gateway: GatewayService) -> Self {
        Self::from_arc(Arc::new(gateway))
    }

    /// The server of a gateway that others share (the REST API submits through it too).
    pub fn from_arc(gateway: Arc<GatewayService>) -> Self {
        let tonic = gateway.tonic_server();
        Self { gateway, tonic, authenticator: None }
    }

    /// Every call is authenticated by `authenticator` first (see [`crate::authenticate`]).
    pub fn with_authenticator(mut self, authenticator: Arc<dyn Authenticator>) -> Self {
        self.authenticator = Some(authenticator);
        self
    }

    /// Serves one accepted connection until the client closes it or, after `stop` resolves, until
    /// its calls in progress end (the client is told to open no more: GOAWAY). A client that does
    /// not send HTTP/2's preface within [`HANDSHAKE_LIMIT`] is closed.
    pub async fn serve_connection<T>(self, io: T, stop: impl Future<Output = ()>)
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let handshake = h2::server::Builder::new()
            .initial_window_size(WINDOW)
            .initial_connection_window_size(WINDOW)
            .max_frame_size(MAX_FRAME)
            .max_header_list_size(MAX_HEADER_LIST)
            .max_send_buffer_size(MAX_SEND_BUFFER)
            .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
            .handshake::<T, Bytes>(io);
        let mut connection = match tokio::time::timeout(HANDSHAKE_LIMIT, handshake).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "HTTP/2 handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!("HTTP/2 handshake timed out");
                return;
            }
        };
        let mut stop = pin!(stop);
        let mut stopping = false;
        loop {
            tokio::select! {
                accepted = connection.accept() => match accepted {
                    Some(Ok((request, respond))) => {
                        let server = self.clone();
                        tokio::spawn(async move { server.handle(request, respond).await });
                    }
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "HTTP/2 connection ended");
                        return;
                    }
                    None => return,
                },
                () = &mut stop, if !stopping => {
                    stopping = true;
                    connection.graceful_shutdown();
                }
            }
        }
    }

    async fn handle(self, request: http::Request<RecvStream>, mut respond: SendResponse<Bytes>) {
        let (mut parts, body) = request.into_parts();
        let limit = grpc_timeout(&parts.headers);
        let caller = match &self.authenticator {
            None => None,
            Some(authenticator) => match until_reset(&mut respond, authenticator.authenticate(&parts.headers)).await {
                None => return,
                Some(Ok(caller)) => Some(caller),
                Some(Err(status)) => return send_status(respond, status),
            },
        };
        if let Some(caller) = &caller {
            parts.extensions.insert(caller.clone());
        }
        if gzip_request(&parts.headers) {
            let Some((bytes, rest)) = read_unary(body, self.gateway.decode_limit()).await else { return };
            let body = match inflate(&bytes, rest.is_some(), self.gateway.config.max_message_bytes) {
                Err(status) => return send_status(respond, status),
                Ok(Some(plain)) => {
                    parts.headers.remove("grpc-encoding");
                    RequestBody { read: Some(plain), rest: None }
                }
                // not one compressed message: tonic answers it
                Ok(None) => RequestBody { read: Some(bytes), rest },
            };
            return self.via_tonic(http::Request::from_parts(parts, body), limit, respond).await;
        }
        let fast = FastCall::from_path(parts.uri.path()).filter(|_| uncompressed(&parts.headers));
        let Some(call) = fast else {
            let body = RequestBody { read: None, rest: Some(body) };
            return self.via_tonic(http::Request::from_parts(parts, body), limit, respond).await;
        };
        // the largest request message tonic decodes: larger ones go to it for its error
        let limit_bytes = self.gateway.decode_limit();
        let Some((bytes, rest)) = read_unary(body, limit_bytes).await else { return };
        let message = if rest.is_none() { single_message(&bytes, limit_bytes) } else { None };
        let Some(message) = message else {
            let body = RequestBody { read: Some(bytes), rest };
            return self.via_tonic(http::Request::from_parts(parts, body), limit, respond).await;
        };
        let answer = self.answer(call, message, caller);
        match until_reset(&mut respond, within(limit, answer, || Some(Err(timeout_expired())))).await {
            // the client reset the stream: nothing to answer
            None => {}
            // not a request of this call's type: tonic answers it (and says why)
            Some(None) => {
                let body = RequestBody { read: Some(bytes), rest: None };
                self.via_tonic(http::Request::from_parts(parts, body), limit, respond).await
            }
            Some(Some(Ok(encoded))) => send_message(respond, encoded),
            Some(Some(Err(status))) => send_status(respond, status),
        }
    }

    /// The call's answer as a gRPC message (length-prefixed), or `None` if `message` does not
    /// decode as its request.
    async fn answer(&self, call: FastCall, message: Bytes, caller: Option<Caller>) -> Option<Result<Bytes, Status>> {
        let gateway = &*self.gateway;
        match call {
            FastCall::CreateProcessInstance => unary(message, caller, |r| gateway.create_process_instance(r)).await,
            FastCall::CompleteJob => unary(message, caller, |r| gateway.complete_job(r)).await,
            FastCall::FailJob => unary(message, caller, |r| gateway.fail_job(r)).await,
            FastCall::PublishMessage => unary(message, caller, |r| gateway.publish_message(r)).await,
        }
    }

    /// Hands the call to tonic and pipes its answer back.
    async fn via_tonic(mut self, request: http::Request<RequestBody>, limit: Option<Duration>, mut respond: SendResponse<Bytes>) {
        let call = Service::call(&mut self.tonic, request);
        let response = match until_reset(&mut respond, within(limit, call, || Ok(timeout_expired().into_http()))).await {
            None => return,
            Some(Ok(response)) => response,
            Some(Err(never)) => match never {},
        };
        let (mut parts, body) = response.into_parts();
        zeebe_size_error(&mut parts.headers, self.gateway.config.max_message_bytes);
        let head = http::Response::from_parts(parts, ());
        if body.is_end_stream() {
            let _ = respond.send_response(head, true);
            return;
        }
        let Ok(stream) = respond.send_response(head, false) else { return };
        pipe(body, stream).await;
    }
}

/// Decodes `message` as `Req` (`None` if it does not decode), calls `method` with it (and the
/// caller in its extensions) and frames its answer.
async fn unary<Req, Resp, F, Fut>(message: Bytes, caller: Option<Caller>, method: F) -> Option<Result<Bytes, Status>>
where
    Req: Message + Default,
    Resp: Message,
    F: FnOnce(Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
{
    let mut request = Request::new(Req::decode(message).ok()?);
    if let Some(caller) = caller {
        request.extensions_mut().insert(caller);
    }
    Some(method(request).await.map(|r| grpc_frame::frame(r.get_ref())))
}

/// Whether neither the request nor its answer would be compressed (no `grpc-encoding` other than
/// identity; no gzip accepted in return, which tonic would answer compressed).
fn uncompressed(headers: &HeaderMap) -> bool {
    let identity = headers.get("grpc-encoding").is_none_or(|v| v.as_bytes() == b"identity");
    let accepts_gzip = headers.get_all("grpc-accept-encoding").iter().any(|v| v.as_bytes().windows(4).any(|w| w == b"gzip"));
    identity && !accepts_gzip
}

/// Whether the request's message is gzip-compressed.
fn gzip_request(headers: &HeaderMap) -> bool {
    headers.get("grpc-encoding").is_some_and(|v| v.as_bytes() == b"gzip")
}

/// Zeebe's answer to a request message of `size` bytes over `max` (grpc-java's, which Zeebe's
/// gateway gives: camunda/camunda#12108).
fn exceeds(max: usize, size: impl std::fmt::Display) -> Status {
    Status::resource_exhausted(format!("gRPC message exceeds maximum size {max}: {size}"))
}

/// A gzip request's one message inflated (at most `max` bytes) and framed uncompressed;
/// `Ok(None)` if `body` is not one compressed message or does not inflate (tonic's answer then);
/// RESOURCE_EXHAUSTED if it is larger than allowed, compressed (`more`: the body goes on past
/// what was read) or inflated.
fn inflate(body: &[u8], more: bool, max: usize) -> Result<Option<Bytes>, Status> {
    use std::io::Read;
    if more {
        let declared = body.get(1..grpc_frame::PREFIX_BYTES).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        return Err(exceeds(max, declared));
    }
    let Some((true, message)) = grpc_frame::single(body) else { return Ok(None) };
    let mut plain = Vec::new();
    let mut decoder = flate2::read::GzDecoder::new(message).take(max as u64 + 1);
    if decoder.read_to_end(&mut plain).is_err() {
        return Ok(None);
    }
    if plain.len() > max {
        return Err(Status::resource_exhausted(format!("Decompressed gRPC message exceeds maximum size {max}")));
    }
    let mut framed = Vec::with_capacity(grpc_frame::PREFIX_BYTES + plain.len());
    framed.push(0);
    framed.extend_from_slice(&(plain.len() as u32).to_be_bytes());
    framed.extend_from_slice(&plain);
    Ok(Some(framed.into()))
}

/// Rewrites tonic's answer to a request message past its decoding limit (OUT_OF_RANGE "Error,
/// decoded message length too large: found N bytes, ...") to Zeebe's for it.
fn zeebe_size_error(headers: &mut HeaderMap, max: usize) {
    let Some(status) = Status::from_header_map(headers).filter(|s| s.code() == tonic::Code::OutOfRange) else { return };
    let found = status.message().strip_prefix("Error, decoded message length too large: found ").and_then(|m| m.split(' ').next());
    if let Some(found) = found {
        let (parts, _) = exceeds(max, found).into_http().into_parts();
        for name in [Status::GRPC_STATUS, Status::GRPC_MESSAGE] {
            if let Some(value) = parts.headers.get(&name) {
                headers.insert(name, value.clone());
            }
        }
    }
}

/// A unary request's body, read up to one message of at most `limit` bytes, or `None` if the
/// client reset the stream. The stream comes back with what was read if the body is longer.
async fn read_unary(mut body: RecvStream, limit: usize) -> Option<(Bytes, Option<RecvStream>)> {
    // one chunk is the usual case: kept as it came; more are joined
    let mut chunks: Vec<Bytes> = Vec::with_capacity(1);
    let mut read = 0;
    let mut rest = None;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.ok()?;
        let _ = body.flow_control().release_capacity(chunk.len());
        read += chunk.len();
        chunks.push(chunk);
        if read > grpc_frame::PREFIX_BYTES + limit {
            rest = Some(body);
            break;
        }
    }
    let bytes = match chunks.len() {
        1 => chunks.pop().unwrap_or_default(),
        _ => chunks.concat().into(),
    };
    Some((bytes, rest))
}

/// The one uncompressed message a unary request body holds, if it holds exactly that and it is
/// within `limit`.
fn single_message(body: &Bytes, limit: usize) -> Option<Bytes> {
    match grpc_frame::single(body)? {
        (false, message) if message.len() <= limit => Some(body.slice_ref(message)),
        _ => None,
    }
}

/// `grpc-timeout` (gRPC's over-the-wire form: up to 8 digits and a unit), if given and valid.
fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `work`, bounded by the call's `grpc-timeout` as tonic's timeout layer bounds it (`expired`
/// gives the answer then).
async fn within<T>(limit: Option<Duration>, work: impl Future<Output = T>, expired: impl FnOnce() -> T) -> T {
    match limit {
        None => work.await,
        Some(limit) => tokio::time::timeout(limit, work).await.unwrap_or_else(|_| expired()),
    }
}

/// tonic's answer to a call past its `grpc-timeout`.
fn timeout_expired() -> Status {
    Status::cancelled("Timeout expired")
}

/// Runs `work` until it ends (`Some`) or the client resets the stream (`None`, `work` dropped).
async fn until_reset<F: Future>(respond: &mut SendResponse<Bytes>, work: F) -> Option<F::Output> {
    let mut work = pin!(work);
    poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        match respond.poll_reset(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

fn grpc_headers() -> http::Response<()> {
    let mut head = http::Response::new(());
    head.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    head
}

/// Answers with one message and `grpc-status: 0`.
fn send_message(mut respond: SendResponse<Bytes>, message: Bytes) {
    let Ok(mut stream) = respond.send_response(grpc_headers(), false) else { return };
    if stream.send_data(message, false).is_err() {
        return;
    }
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert(Status::GRPC_STATUS, HeaderValue::from_static("0"));
    let _ = stream.send_trailers(trailers);
}

/// Answers with a trailers-only response carrying `status`.
fn send_status(mut respond: SendResponse<Bytes>, status: Status) {
    let (parts, _) = status.into_http().into_parts();
    let _ = respond.send_response(http::Response::from_parts(parts, ()), true);
}

/// Writes a response body to the stream: each data frame, then the trailers (or an empty
/// end-of-stream frame); a reset by the client or an error of the body ends it. The body is
/// polled for a frame only once the stream has capacity: while a client's window is full, a job
/// stream's jobs stay in its channel, from which they return to the pool if the client goes away
/// (a job taken out and encoded before would be lost with the frame until its time-out).
async fn pipe(body: tonic::body::BoxBody, mut stream: SendStream<Bytes>) {
    let mut body = pin!(body);
    loop {
        if !wait_for_capacity(&mut stream).await {
            return;
        }
        let frame = poll_fn(|cx| {
            if stream.poll_reset(cx).is_ready() {
                return Poll::Ready(None);
            }
            body.as_mut().poll_frame(cx).map(Some)
        })
        .await;
        let Some(frame) = frame else { return };
        match frame {
            None => {
                let _ = stream.send_data(Bytes::new(), true);
                return;
            }
            Some(Err(status)) => {
                tracing::debug!(%status, "response body failed");
                stream.send_reset(Reason::INTERNAL_ERROR);
                return;
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    if !data.has_remaining() {
                        continue;
                    }
                    let end = body.is_end_stream();
                    if stream.send_data(data, end).is_err() || end {
                        return;
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        stream.reserve_capacity(0);
                        let _ = stream.send_trailers(trailers);
                        return;
                    }
                }
            },
        }
    }
}

/// Waits until the stream may send data (some window assigned); false if it cannot any more.
async fn wait_for_capacity(stream: &mut SendStream<Bytes>) -> bool {
    stream.reserve_capacity(1);
    poll_fn(|cx| loop {
        if stream.capacity() > 0 {
            return Poll::Ready(true);
        }
        if stream.poll_reset(cx).is_ready() {
            return Poll::Ready(false);
        }
        match stream.poll_capacity(cx) {
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(_) => return Poll::Ready(false),
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
}

/// A request body for tonic: the bytes already read from the stream, if any, then the rest of
/// the stream, if any.
struct RequestBody {
    read: Option<Bytes>,
    rest: Option<RecvStream>,
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let me = self.get_mut();
        if let Some(read) = me.read.take() {
            return Poll::Ready(Some(Ok(Frame::data(read))));
        }
        let Some(stream) = me.rest.as_mut() else { return Poll::Ready(None) };
        match stream.poll_data(cx) {
            Poll::Ready(Some(Ok(data))) => {
                let _ = stream.flow_control().release_capacity(data.len());
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => match stream.poll_trailers(cx) {
                Poll::Ready(Ok(Some(trailers))) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
                Poll::Ready(Ok(None)) => Poll::Ready(None),
                Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
                Poll::Pending => Poll::Pending,
            },
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_none() && self.rest.as_ref().is_none_or(RecvStream::is_end_stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waggle_protocol::gateway as pb;

    #[test]
    fn fast_calls_by_path() {
        assert_eq!(FastCall::from_path("/gateway_protocol.Gateway/CompleteJob"), Some(FastCall::CompleteJob));
        assert_eq!(FastCall::from_path("/gateway_protocol.Gateway/StreamActivatedJobs"), None);
        assert_eq!(FastCall::from_path("/other.Service/CompleteJob"), None);
    }

    #[test]
    fn single_uncompressed_message_only() {
        let framed = grpc_frame::frame(&pb::CompleteJobRequest { job_key: 7, variables: "{}".into() });
        let message = single_message(&framed, 1024).expect("one message");
        assert_eq!(pb::CompleteJobRequest::decode(message).unwrap().job_key, 7);
        let mut two = framed.to_vec();
        two.extend_from_slice(&framed);
        assert!(single_message(&Bytes::from(two), 1024).is_none(), "two messages");
        let mut compressed = framed.to_vec();
        compressed[0] = 1;
        assert!(single_message(&Bytes::from(compressed), 1024).is_none(), "compressed flag");
        assert!(single_message(&framed, 3).is_none(), "over the limit");
        assert!(single_message(&framed.slice(..framed.len() - 1), 1024).is_none(), "truncated");
        assert!(single_message(&Bytes::new(), 1024).is_none(), "empty");
    }

    #[test]
    fn grpc_timeout_units() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", HeaderValue::from_static(v));
            grpc_timeout(&h)
        };
        assert_eq!(with("5S"), Some(Duration::from_secs(5)));
        assert_eq!(with("250m"), Some(Duration::from_millis(250)));
        assert_eq!(with("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(with("123456789S"), None, "more than 8 digits");
        assert_eq!(with("S"), None);
        assert_eq!(with("10x"), None);
    }

    #[test]
    fn gzip_inflates_within_the_limit_only() {
        use std::io::Write;
        let gzip = |data: &[u8]| {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(data).unwrap();
            let compressed = encoder.finish().unwrap();
            let mut framed = vec![1];
            framed.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
            framed.extend_from_slice(&compressed);
            framed
        };
        let plain = inflate(&gzip(b"hello"), false, 1024).unwrap().expect("inflated");
        assert_eq!(grpc_frame::single(&plain), Some((false, &b"hello"[..])));
        // a bomb: 64 MB of zeros in ~64 KB, refused after inflating 1 KB
        let bomb = gzip(&vec![0; 64 << 20]);
        assert!(bomb.len() < 1 << 20);
        let status = inflate(&bomb, false, 1024).unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(status.message(), "Decompressed gRPC message exceeds maximum size 1024");
        assert_eq!(inflate(&gzip(b"x")[..8], false, 1024).unwrap(), None, "truncated: tonic's answer");
        let status = inflate(&gzip(b"x"), true, 1024).unwrap_err();
        assert!(status.message().starts_with("gRPC message exceeds maximum size 1024: "), "{}", status.message());
    }

    #[test]
    fn tonics_size_error_becomes_zeebes() {
        let mut headers = Status::out_of_range("Error, decoded message length too large: found 9437203 bytes, the limit is: 8388608 bytes")
            .into_http()
            .into_parts()
            .0
            .headers;
        zeebe_size_error(&mut headers, 4194304);
        let status = Status::from_header_map(&headers).unwrap();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(status.message(), "gRPC message exceeds maximum size 4194304: 9437203");
        let mut other = Status::out_of_range("something else").into_http().into_parts().0.headers;
        zeebe_size_error(&mut other, 4194304);
        assert_eq!(other[Status::GRPC_STATUS], "11");
    }

    #[test]
    fn compression_sends_a_call_to_tonic() {
        let mut h = HeaderMap::new();
        assert!(uncompressed(&h));
        h.insert("grpc-accept-encoding", HeaderValue::from_static("identity,deflate,gzip"));
        assert!(!uncompressed(&h));
        let mut h = HeaderMap::new();
        h.insert("grpc-encoding", HeaderValue::from_static("gzip"));
        assert!(!uncompressed(&h));
        h.insert("grpc-encoding", HeaderValue::from_static("identity"));
        assert!(uncompressed(&h));
    }
}
