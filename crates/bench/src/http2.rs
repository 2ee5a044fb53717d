//! A lean HTTP/2 client (RFC 9113) for the bench's per-instance gRPC calls and its job stream.
//!
//! The bench shares the two cores with the server it measures, so every microsecond it spends
//! per instance is taken from the server. The `h2` crate keeps a full state machine, a
//! prioritiser and an HPACK encoder per stream; here a request is a precomputed header block and
//! one DATA frame appended to a shared buffer, and an answer is matched to its caller by stream
//! id. One task reads and dispatches frames, one writes whatever callers queued since its last
//! write, so calls made in the same turn of the runtime leave in one write.
//!
//! What it implements of HTTP/2 is what a gRPC client needs: requests on client streams, flow
//! control both ways, SETTINGS, PING, GOAWAY, RST_STREAM, CONTINUATION and a full HPACK decoder
//! ([`crate::hpack`]). It sends no priorities and refuses server push.

// A failed call is answered with tonic's `Status`, as the tonic calls beside these are: boxing it
// would only add an allocation on the error path.
#![allow(clippy::result_large_err)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Notify};
use tonic::{Code, Status};
use waggle_protocol::grpc_frame::PREFIX_BYTES;

use crate::hpack;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Receive windows as tonic's client (hyper's defaults) opens them.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
/// The windows both ends start with, and the smallest frame size limit (RFC 9113 6.5.2).
const DEFAULT_WINDOW: i64 = 65_535;
const DEFAULT_MAX_FRAME: usize = 16_384;
/// Largest frame accepted from the server (we do not raise SETTINGS_MAX_FRAME_SIZE, but a lenient
/// reader costs nothing).
const MAX_FRAME_ACCEPTED: usize = 1 << 24;
/// Largest answer accepted (as the tonic client's decoding limit in [`crate::client`]).
const MAX_ANSWER: usize = 64 << 20;
const READ_BUFFER: usize = 256 * 1024;
const SETTINGS_TIMEOUT: Duration = Duration::from_secs(5);

mod frame {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;

    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;

    pub const CANCEL: u32 = 0x8;
}

/// The header block of one gRPC method's requests, encoded once.
pub struct Method(Bytes);

/// One HTTP/2 connection; clones share it. It is not re-established: once broken, every call
/// fails with UNAVAILABLE.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
    authority: Arc<str>,
    /// Over TLS (`:scheme https`).
    tls: bool,
    /// The `authorization` header of every request, when set.
    authorization: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    writer: Notify,
}

/// Who waits for a stream's answer.
enum Answer {
    /// The one message of a unary call.
    Unary(oneshot::Sender<Result<Bytes, Status>>),
    /// Every message of a server stream, then an error if it ends with one.
    Messages(mpsc::UnboundedSender<Result<Bytes, Status>>),
}

impl Answer {
    fn fail(self, status: Status) {
        match self {
            Answer::Unary(tx) => drop(tx.send(Err(status))),
            Answer::Messages(tx) => drop(tx.send(Err(status))),
        }
    }
}

struct Stream {
    answer: Answer,
    /// Request bytes not sent yet (waiting for flow-control window).
    unsent: Bytes,
    end_sent: bool,
    send_window: i64,
    /// Answer bytes received and not yet handed over.
    body: BytesMut,
    headers_seen: bool,
    /// Received bytes handed over (and so consumed) and not yet returned to the server's window.
    to_release: u32,
}

/// A request waiting for the server's concurrent stream limit; its id is taken already, as ids
/// must open in increasing order.
struct Opening {
    id: u32,
    block: Bytes,
    body: Bytes,
    answer: Answer,
}

/// How a header block ended the gRPC call, if it did.
enum GrpcStatus {
    Ok,
    Failed(Vec<u8>),
}

struct State {
    /// Bytes for the writer task.
    out: Vec<u8>,
    next_id: u32,
    streams: HashMap<u32, Stream>,
    /// Streams with request bytes to send, in order.
    sending: VecDeque<u32>,
    waiting: VecDeque<Opening>,
    send_window: i64,
    peer_initial_window: i64,
    peer_max_frame: usize,
    peer_max_streams: usize,
    /// Bytes received on the connection not yet returned to the server's window.
    to_release: u32,
    decoder: hpack::Decoder,
    /// A header block continued by CONTINUATION frames: (stream, END_STREAM, the block so far).
    continuation: Option<(u32, bool, Vec<u8>)>,
    /// Why the connection cannot be used any more.
    broken: Option<String>,
    /// Told when the server's first SETTINGS arrived.
    settings_seen: Option<oneshot::Sender<()>>,
}

/// Connects to `address` (`host:port`) and waits for the server's SETTINGS; tasks of the current
/// runtime read and write the connection. Over TLS and with a bearer token on every request when
/// [`crate::secure`] says so.
pub async fn connect(address: &str) -> std::io::Result<Connection> {
    let tcp = tokio::net::TcpStream::connect(address).await?;
    tcp.set_nodelay(true)?;
    let secure = crate::secure::get();
    match &secure.tls {
        None => {
            let (read, write) = tcp.into_split();
            start(address, read, write, false, secure.authorization.clone()).await
        }
        Some(tls) => {
            let stream = crate::secure::handshake(tls, address, tcp).await?;
            let (read, write) = tokio::io::split(stream);
            start(address, read, write, true, secure.authorization.clone()).await
        }
    }
}

async fn start<R, W>(address: &str, read: R, write: W, tls: bool, authorization: Option<String>) -> std::io::Result<Connection>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (settings_tx, settings_rx) = oneshot::channel();
    let mut out = PREFACE.to_vec();
    put_frame_header(&mut out, 12, frame::SETTINGS, 0, 0);
    put_setting(&mut out, 0x2, 0); // ENABLE_PUSH
    put_setting(&mut out, 0x4, STREAM_WINDOW); // INITIAL_WINDOW_SIZE
    put_window_update(&mut out, 0, CONNECTION_WINDOW - DEFAULT_WINDOW as u32);
    let state = State {
        out,
        next_id: 1,
        streams: HashMap::new(),
        sending: VecDeque::new(),
        waiting: VecDeque::new(),
        send_window: DEFAULT_WINDOW,
        peer_initial_window: DEFAULT_WINDOW,
        peer_max_frame: DEFAULT_MAX_FRAME,
        peer_max_streams: usize::MAX,
        to_release: 0,
        decoder: hpack::Decoder::default(),
        continuation: None,
        broken: None,
        settings_seen: Some(settings_tx),
    };
    let shared = Arc::new(Shared { state: Mutex::new(state), writer: Notify::new() });
    tokio::spawn(write_loop(shared.clone(), write));
    tokio::spawn(read_loop(shared.clone(), read));
    shared.writer.notify_one();
    match tokio::time::timeout(SETTINGS_TIMEOUT, settings_rx).await {
        Ok(Ok(())) => Ok(Connection { shared, authority: address.into(), tls, authorization }),
        Ok(Err(_)) => {
            let reason = shared.lock().broken.clone().unwrap_or_default();
            Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, format!("HTTP/2 handshake with {address}: {reason}")))
        }
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no HTTP/2 SETTINGS from {address}"))),
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("HTTP/2 connection state poisoned")
    }
}

impl Connection {
    /// The header block for gRPC method `path` (`/package.Service/Method`) on this connection.
    pub fn method(&self, path: &str) -> Method {
        let mut headers = vec![
            (":method", "POST"),
            (":scheme", if self.tls { "https" } else { "http" }),
            (":path", path),
            (":authority", &self.authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ];
        if let Some(value) = &self.authorization {
            headers.push(("authorization", value.as_str()));
        }
        Method(hpack::encode_literal_block(&headers).into())
    }

    /// Sends one framed gRPC message to `method`; resolves to the one message of the answer.
    pub async fn unary(&self, method: &Method, body: Bytes) -> Result<Bytes, Status> {
        let (tx, rx) = oneshot::channel();
        self.open(method, body, Answer::Unary(tx));
        rx.await.unwrap_or_else(|_| Err(Status::new(Code::Unavailable, "HTTP/2 connection dropped the call")))
    }

    /// Sends one framed gRPC message to a server-streaming `method`; the answer's messages arrive
    /// on the returned stream.
    pub fn server_stream(&self, method: &Method, body: Bytes) -> MessageStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.open(method, body, Answer::Messages(tx));
        MessageStream { messages: rx, connection: self.clone(), id }
    }

    /// Opens a stream for `body`, or queues it behind the server's stream limit; returns its id.
    fn open(&self, method: &Method, body: Bytes, answer: Answer) -> u32 {
        let mut state = self.shared.lock();
        if let Some(reason) = &state.broken {
            answer.fail(unavailable(reason));
            return 0;
        }
        let id = state.next_id;
        if id > i32::MAX as u32 {
            answer.fail(unavailable("stream ids exhausted"));
            return 0;
        }
        state.next_id += 2;
        let opening = Opening { id, block: method.0.clone(), body, answer };
        if state.waiting.is_empty() && state.streams.len() < state.peer_max_streams {
            state.start(opening);
        } else {
            state.waiting.push_back(opening);
        }
        drop(state);
        self.shared.writer.notify_one();
        id
    }
}

/// The messages of a server stream. Dropping it cancels the stream.
pub struct MessageStream {
    messages: mpsc::UnboundedReceiver<Result<Bytes, Status>>,
    connection: Connection,
    id: u32,
}

impl MessageStream {
    /// The next message; `None` once the stream ended without error.
    pub async fn next(&mut self) -> Option<Result<Bytes, Status>> {
        let message = self.messages.recv().await?;
        if let Ok(m) = &message {
            // the message is consumed: return its bytes to the stream's window
            let mut state = self.connection.shared.lock();
            if state.release(self.id, (PREFIX_BYTES + m.len()) as u32) {
                drop(state);
                self.connection.shared.writer.notify_one();
            }
        }
        Some(message)
    }
}

impl Drop for MessageStream {
    fn drop(&mut self) {
        let mut state = self.connection.shared.lock();
        if state.streams.remove(&self.id).is_some() {
            put_rst_stream(&mut state.out, self.id, frame::CANCEL);
            state.stream_closed();
            drop(state);
            self.connection.shared.writer.notify_one();
        }
    }
}

impl State {
    fn start(&mut self, o: Opening) {
        put_frame_header(&mut self.out, o.block.len(), frame::HEADERS, frame::END_HEADERS, o.id);
        self.out.extend_from_slice(&o.block);
        let stream = Stream {
            answer: o.answer,
            unsent: o.body,
            end_sent: false,
            send_window: self.peer_initial_window,
            body: BytesMut::new(),
            headers_seen: false,
            to_release: 0,
        };
        self.streams.insert(o.id, stream);
        self.sending.push_back(o.id);
        self.send_data();
    }

    /// Frames as much queued request data as the windows allow, in order.
    fn send_data(&mut self) {
        while let Some(&id) = self.sending.front() {
            let Some(stream) = self.streams.get_mut(&id) else {
                self.sending.pop_front();
                continue;
            };
            while !stream.end_sent {
                let allowed = self.send_window.min(stream.send_window).max(0) as usize;
                let n = stream.unsent.len().min(self.peer_max_frame).min(allowed);
                if n == 0 && !stream.unsent.is_empty() {
                    return; // wait for WINDOW_UPDATE
                }
                let chunk = stream.unsent.split_to(n);
                let last = stream.unsent.is_empty();
                put_frame_header(&mut self.out, n, frame::DATA, if last { frame::END_STREAM } else { 0 }, id);
                self.out.extend_from_slice(&chunk);
                self.send_window -= n as i64;
                stream.send_window -= n as i64;
                stream.end_sent = last;
            }
            self.sending.pop_front();
        }
    }

    /// A stream is gone: starts queued requests that now fit the server's limit.
    fn stream_closed(&mut self) {
        while self.streams.len() < self.peer_max_streams {
            let Some(o) = self.waiting.pop_front() else { break };
            self.start(o);
        }
    }

    /// Returns `bytes` of stream `id` to the server's window once they add up; whether a frame
    /// was queued.
    fn release(&mut self, id: u32, bytes: u32) -> bool {
        let Some(stream) = self.streams.get_mut(&id) else { return false };
        stream.to_release += bytes;
        if stream.to_release < STREAM_WINDOW / 2 {
            return false;
        }
        put_window_update(&mut self.out, id, stream.to_release);
        stream.to_release = 0;
        true
    }

    /// Ends stream `id`: its caller gets `result` (for a unary call, the answer's message).
    fn finish(&mut self, id: u32, result: Result<(), Status>) {
        let Some(stream) = self.streams.remove(&id) else { return };
        if !stream.end_sent {
            put_rst_stream(&mut self.out, id, frame::CANCEL);
        }
        self.stream_closed();
        match stream.answer {
            Answer::Unary(tx) => drop(tx.send(result.and_then(|()| unframe(stream.body.freeze())))),
            Answer::Messages(tx) => {
                let result = result.and_then(|()| match stream.body.is_empty() {
                    true => Ok(()),
                    false => Err(Status::new(Code::Internal, "answer ended inside a message")),
                });
                if let Err(status) = result {
                    let _ = tx.send(Err(status));
                }
            }
        }
    }

    /// The connection is unusable: every call fails with `reason`.
    fn break_all(&mut self, reason: String) {
        for (_, stream) in self.streams.drain() {
            stream.answer.fail(unavailable(&reason));
        }
        for o in self.waiting.drain(..) {
            o.answer.fail(unavailable(&reason));
        }
        self.sending.clear();
        self.settings_seen = None;
        self.broken.get_or_insert(reason);
    }

    fn on_frame(&mut self, kind: u8, flags: u8, id: u32, payload: Bytes) -> Result<(), String> {
        if self.continuation.as_ref().is_some_and(|c| kind != frame::CONTINUATION || id != c.0) {
            return Err("header block interrupted by another frame".into());
        }
        match kind {
            frame::DATA => self.on_data(id, flags, payload),
            frame::HEADERS => {
                let mut block = unpad(flags, &payload)?;
                if flags & frame::PRIORITY != 0 {
                    block = block.get(5..).ok_or("HEADERS too short for its priority")?;
                }
                let end_stream = flags & frame::END_STREAM != 0;
                if flags & frame::END_HEADERS != 0 {
                    self.on_headers(id, end_stream, block)
                } else {
                    self.continuation = Some((id, end_stream, block.to_vec()));
                    Ok(())
                }
            }
            frame::CONTINUATION => {
                let (id, end_stream, mut block) = self.continuation.take().ok_or("CONTINUATION without a header block")?;
                block.extend_from_slice(&payload);
                if flags & frame::END_HEADERS != 0 {
                    self.on_headers(id, end_stream, &block)
                } else {
                    self.continuation = Some((id, end_stream, block));
                    Ok(())
                }
            }
            frame::RST_STREAM => {
                let code = u32_at(&payload, 0).ok_or("short RST_STREAM")?;
                if let Some(stream) = self.streams.get_mut(&id) {
                    stream.end_sent = true; // the stream is closed both ways: nothing to reset
                }
                self.finish(id, Err(reset_status(code)));
                Ok(())
            }
            frame::SETTINGS => {
                if flags & frame::ACK == 0 {
                    self.on_settings(&payload)?;
                }
                Ok(())
            }
            frame::PING => {
                if flags & frame::ACK == 0 {
                    put_frame_header(&mut self.out, payload.len(), frame::PING, frame::ACK, 0);
                    self.out.extend_from_slice(&payload);
                }
                Ok(())
            }
            frame::GOAWAY => {
                let last = u32_at(&payload, 0).ok_or("short GOAWAY")? & 0x7fff_ffff;
                let code = u32_at(&payload, 4).ok_or("short GOAWAY")?;
                let reason = format!("the server is going away (GOAWAY code {code}: {})", String::from_utf8_lossy(&payload[8..]));
                let refused: Vec<u32> = self.streams.keys().copied().filter(|&s| s > last).collect();
                for s in refused {
                    self.finish(s, Err(unavailable(&reason)));
                }
                for o in self.waiting.drain(..) {
                    o.answer.fail(unavailable(&reason));
                }
                self.broken.get_or_insert(reason);
                Ok(())
            }
            frame::WINDOW_UPDATE => {
                let increment = (u32_at(&payload, 0).ok_or("short WINDOW_UPDATE")? & 0x7fff_ffff) as i64;
                if id == 0 {
                    self.send_window += increment;
                } else if let Some(stream) = self.streams.get_mut(&id) {
                    stream.send_window += increment;
                }
                self.send_data();
                Ok(())
            }
            frame::PUSH_PROMISE => Err("server push, which the client disabled".into()),
            // PRIORITY and unknown frame types are ignored (RFC 9113 4.1, 5.5)
            _ => Ok(()),
        }
    }

    fn on_settings(&mut self, payload: &[u8]) -> Result<(), String> {
        if !payload.len().is_multiple_of(6) {
            return Err("SETTINGS of a bad length".into());
        }
        for entry in payload.chunks_exact(6) {
            let value = u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]);
            match u16::from_be_bytes([entry[0], entry[1]]) {
                0x3 => self.peer_max_streams = value as usize,
                0x4 => {
                    if value > i32::MAX as u32 {
                        return Err("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1".into());
                    }
                    let delta = value as i64 - self.peer_initial_window;
                    self.peer_initial_window = value as i64;
                    for stream in self.streams.values_mut() {
                        stream.send_window += delta;
                    }
                }
                0x5 => {
                    if !(DEFAULT_MAX_FRAME..=MAX_FRAME_ACCEPTED).contains(&(value as usize)) {
                        return Err("SETTINGS_MAX_FRAME_SIZE out of range".into());
                    }
                    self.peer_max_frame = value as usize;
                }
                // header table size (we never index), push, header list size: nothing to do
                _ => {}
            }
        }
        put_frame_header(&mut self.out, 0, frame::SETTINGS, frame::ACK, 0);
        if let Some(seen) = self.settings_seen.take() {
            let _ = seen.send(());
        }
        self.stream_closed();
        self.send_data();
        Ok(())
    }

    fn on_data(&mut self, id: u32, flags: u8, payload: Bytes) -> Result<(), String> {
        let flow_controlled = payload.len() as u32;
        self.to_release += flow_controlled;
        if self.to_release >= CONNECTION_WINDOW / 2 {
            put_window_update(&mut self.out, 0, self.to_release);
            self.to_release = 0;
        }
        let data = match flags & frame::PADDED {
            0 => payload,
            _ => {
                let len = unpad(flags, &payload)?.len();
                payload.slice(1..1 + len)
            }
        };
        let Some(stream) = self.streams.get_mut(&id) else { return Ok(()) };
        let mut released_now = flow_controlled - data.len() as u32;
        match &stream.answer {
            Answer::Unary(_) => {
                stream.body.extend_from_slice(&data);
                released_now = flow_controlled;
            }
            Answer::Messages(tx) => split_messages(&mut stream.body, data, |m| drop(tx.send(m))),
        }
        let too_large = stream.body.len() > MAX_ANSWER + PREFIX_BYTES;
        self.release(id, released_now);
        if too_large {
            self.finish(id, Err(Status::new(Code::OutOfRange, "answer larger than the bench accepts")));
        } else if flags & frame::END_STREAM != 0 {
            self.finish(id, Err(Status::new(Code::Internal, "answer without grpc-status")));
        }
        Ok(())
    }

    fn on_headers(&mut self, id: u32, end_stream: bool, block: &[u8]) -> Result<(), String> {
        let mut http_status_ok = None;
        let mut grpc = None;
        let mut message = None;
        self.decoder
            .decode(block, |name, value| match name {
                b":status" => http_status_ok = Some(value == b"200"),
                b"grpc-status" if value == b"0" => grpc = Some(GrpcStatus::Ok),
                b"grpc-status" => grpc = Some(GrpcStatus::Failed(value.to_vec())),
                b"grpc-message" => message = Some(value.to_vec()),
                _ => {}
            })
            .map_err(|e| e.to_string())?;
        let Some(stream) = self.streams.get_mut(&id) else { return Ok(()) };
        if !std::mem::replace(&mut stream.headers_seen, true) && http_status_ok != Some(true) {
            self.finish(id, Err(Status::new(Code::Unknown, "answer without HTTP status 200")));
            return Ok(());
        }
        if end_stream || grpc.is_some() {
            let result = match grpc {
                None => Err(Status::new(Code::Internal, "answer without grpc-status")),
                Some(GrpcStatus::Ok) => Ok(()),
                Some(GrpcStatus::Failed(code)) => Err(grpc_error(&code, message.as_deref())),
            };
            self.finish(id, result);
        }
        Ok(())
    }
}

/// Appends `data` to `partial` and hands every whole gRPC message to `deliver`; a compressed
/// message is an error (the bench asks for none). Whole messages are sliced out of `data` without
/// a copy.
fn split_messages(partial: &mut BytesMut, mut data: Bytes, mut deliver: impl FnMut(Result<Bytes, Status>)) {
    if !partial.is_empty() {
        partial.extend_from_slice(&data);
        data = partial.split().freeze();
    }
    while let Some(len) = whole_message_len(&data) {
        let framed = data.split_to(len);
        deliver(match framed[0] {
            0 => Ok(framed.slice(PREFIX_BYTES..)),
            _ => Err(Status::new(Code::Internal, "compressed message (the bench asks for none)")),
        });
    }
    partial.extend_from_slice(&data);
}

/// The length of the whole gRPC message (with its prefix) at the start of `data`, if all there.
fn whole_message_len(data: &[u8]) -> Option<usize> {
    let len = u32::from_be_bytes(data.get(1..PREFIX_BYTES)?.try_into().ok()?) as usize;
    (data.len() >= PREFIX_BYTES + len).then_some(PREFIX_BYTES + len)
}

async fn write_loop<W: AsyncWrite + Unpin>(shared: Arc<Shared>, mut write: W) {
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        shared.writer.notified().await;
        {
            let mut state = shared.lock();
            if state.broken.is_some() && state.streams.is_empty() && state.out.is_empty() {
                return;
            }
            std::mem::swap(&mut state.out, &mut buf);
        }
        if buf.is_empty() {
            continue;
        }
        if let Err(e) = write.write_all(&buf).await {
            shared.lock().break_all(format!("writing: {e}"));
            return;
        }
        buf.clear();
    }
}

async fn read_loop<R: AsyncRead + Unpin>(shared: Arc<Shared>, mut read: R) {
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    let reason = 'read: loop {
        if buf.capacity() - buf.len() < READ_BUFFER / 4 {
            buf.reserve(READ_BUFFER);
        }
        match read.read_buf(&mut buf).await {
            Ok(0) => break 'read "the server closed the connection".to_string(),
            Ok(_) => {}
            Err(e) => break 'read format!("reading: {e}"),
        }
        let mut state = shared.lock();
        while buf.len() >= 9 {
            let len = (buf[0] as usize) << 16 | (buf[1] as usize) << 8 | buf[2] as usize;
            if len > MAX_FRAME_ACCEPTED {
                break 'read format!("frame of {len} bytes");
            }
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let id = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            buf.advance(9);
            let payload = buf.split_to(len).freeze();
            if let Err(e) = state.on_frame(kind, flags, id, payload) {
                break 'read format!("protocol error: {e}");
            }
        }
        let wake = !state.out.is_empty();
        drop(state);
        if wake {
            shared.writer.notify_one();
        }
    };
    shared.lock().break_all(reason);
    shared.writer.notify_one();
}

/// The one message of a unary answer.
fn unframe(body: Bytes) -> Result<Bytes, Status> {
    match waggle_protocol::grpc_frame::single(&body) {
        Some((false, _)) => Ok(body.slice(PREFIX_BYTES..)),
        Some((true, _)) => Err(Status::new(Code::Internal, "compressed answer (the bench asks for none)")),
        None if body.is_empty() => Err(Status::new(Code::Internal, "answer without a message")),
        None => Err(Status::new(Code::Internal, "malformed gRPC answer")),
    }
}

/// A frame's payload without its padding.
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], String> {
    if flags & frame::PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload.split_first().ok_or("padded frame without a pad length")?;
    rest.len().checked_sub(pad as usize).map(|len| &rest[..len]).ok_or_else(|| "padding longer than the frame".into())
}

/// A failed call's status, read from its `grpc-status` and `grpc-message` as tonic reads them.
fn grpc_error(code: &[u8], message: Option<&[u8]>) -> Status {
    let mut headers = http::HeaderMap::new();
    if let Ok(v) = http::HeaderValue::from_bytes(code) {
        headers.insert(Status::GRPC_STATUS, v);
    }
    if let Some(v) = message.and_then(|m| http::HeaderValue::from_bytes(m).ok()) {
        headers.insert(Status::GRPC_MESSAGE, v);
    }
    Status::from_header_map(&headers).unwrap_or_else(|| Status::new(Code::Unknown, "unreadable grpc-status"))
}

/// gRPC's mapping of an HTTP/2 reset to a status.
fn reset_status(code: u32) -> Status {
    let code_name = match code {
        0x7 => Code::Unavailable,
        0x8 => Code::Cancelled,
        0xb => Code::ResourceExhausted,
        0xc => Code::PermissionDenied,
        _ => Code::Internal,
    };
    Status::new(code_name, format!("stream reset by the server (HTTP/2 error code {code})"))
}

fn unavailable(reason: &str) -> Status {
    Status::new(Code::Unavailable, format!("HTTP/2: {reason}"))
}

fn u32_at(payload: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(payload.get(at..at + 4)?.try_into().ok()?))
}

fn put_frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, id: u32) {
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&id.to_be_bytes());
}

fn put_setting(out: &mut Vec<u8>, id: u16, value: u32) {
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_window_update(out: &mut Vec<u8>, id: u32, increment: u32) {
    put_frame_header(out, 4, frame::WINDOW_UPDATE, 0, id);
    out.extend_from_slice(&increment.to_be_bytes());
}

fn put_rst_stream(out: &mut Vec<u8>, id: u32, code: u32) {
    put_frame_header(out, 4, frame::RST_STREAM, 0, id);
    out.extend_from_slice(&code.to_be_bytes());
}

#[cfg(test)]
#[path = "http2_tests.rs"]
mod tests;
