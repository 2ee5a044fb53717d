//! Raw HTTP/2 for the tests that talk to the gRPC port below any gRPC client: one call with a
//! body as given (`raw_call`), a call whose answer is never read (`unread_call`), and a
//! connection that writes frames byte by byte as given (`RawFrames`), well-formed or not.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `body` as the whole request body of `method` over a raw HTTP/2 stream; returns the
/// answer's `grpc-status` and `grpc-message` (from headers or trailers).
pub async fn raw_call(address: &str, method: &str, body: Bytes) -> (String, String) {
    raw_call_with(address, method, body, &[]).await
}

/// [`raw_call`] with more request headers.
pub async fn raw_call_with(address: &str, method: &str, body: Bytes, headers: &[(&'static str, &'static str)]) -> (String, String) {
    let tcp = tokio::net::TcpStream::connect(address).await.expect("connect");
    let (send, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(connection);
    let mut send = send.ready().await.expect("ready");
    let mut request = http::Request::post(format!("http://{address}/gateway_protocol.Gateway/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(()).unwrap();
    let (answer, mut stream) = send.send_request(request, false).expect("send request");
    stream.send_data(body, true).expect("send body");
    let (parts, mut body) = answer.await.expect("answer").into_parts();
    let headers = if parts.headers.contains_key("grpc-status") {
        parts.headers
    } else {
        while let Some(chunk) = body.data().await {
            chunk.expect("data");
        }
        body.trailers().await.expect("trailers").expect("trailers present")
    };
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (text("grpc-status"), text("grpc-message"))
}

/// `message` as one uncompressed gRPC message (its 5-byte prefix, then it).
pub fn framed(message: &[u8]) -> Bytes {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

/// Opens a call to `method` on a connection whose window is 0 (the client reads nothing: what
/// the server answers waits on its side) and sends `message`; returns once the answer's headers
/// came, with what keeps the call open: dropping them and aborting the task is the client going
/// away.
pub async fn unread_call(
    address: &str,
    method: &str,
    message: &[u8],
) -> (http::Response<h2::RecvStream>, h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<Result<(), h2::Error>>) {
    let tcp = tokio::net::TcpStream::connect(address).await.expect("connect");
    let (send, connection) = h2::client::Builder::new().initial_window_size(0).handshake(tcp).await.expect("handshake");
    let connection = tokio::spawn(connection);
    let mut send = send.ready().await.expect("ready");
    let request = http::Request::post(format!("http://{address}/gateway_protocol.Gateway/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (answer, mut body) = send.send_request(request, false).expect("send request");
    body.send_data(framed(message), true).expect("send body");
    let answer = answer.await.expect("answer headers");
    assert_eq!(answer.status(), 200);
    (answer, send, connection)
}

/// HTTP/2 frame types (RFC 9113 §6).
pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// Error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
pub mod reason {
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// One frame: its 9-byte header (length, type, flags, stream id), then `payload`.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    frame_claiming(payload.len() as u32, kind, flags, stream, payload)
}

/// A frame whose header claims `length` whatever `payload` holds.
pub fn frame_claiming(length: u32, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&length.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Header blocks are encoded by the bench's HTTP/2 client's HPACK: literal fields, no dynamic
/// table, no Huffman coding.
pub use waggle_bench::hpack::encode_literal_block;

/// The request headers of a gRPC call to `method`.
pub fn grpc_headers(method: &str) -> Vec<u8> {
    let path = format!("/gateway_protocol.Gateway/{method}");
    encode_literal_block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", &path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ])
}

/// How a connection that was sent frames ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The server sent GOAWAY with this error code (and then closed, or not yet).
    GoAway(u32),
    /// The server closed the connection without a GOAWAY.
    Closed,
    /// Still open when we stopped waiting.
    Open,
}

/// A connection to the gRPC port that writes bytes as given: the client preface and an empty
/// SETTINGS frame, then whatever frames a test makes; it reads what the server answers.
pub struct RawFrames {
    tcp: TcpStream,
    /// RST_STREAM frames the server sent: (stream, error code).
    pub resets: Vec<(u32, u32)>,
    /// HEADERS frames the server sent (the answers' heads and trailers).
    pub headers: usize,
    read: Vec<u8>,
}

impl RawFrames {
    /// Connects and sends the preface and SETTINGS (without waiting for the server's).
    pub async fn connect(address: &str) -> RawFrames {
        let mut frames = RawFrames::connect_bare(address).await;
        frames.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.expect("preface");
        frames.send(&frame(kind::SETTINGS, 0, 0, &[])).await.expect("settings");
        frames
    }

    /// Connects and sends nothing.
    pub async fn connect_bare(address: &str) -> RawFrames {
        let tcp = TcpStream::connect(address).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        RawFrames { tcp, resets: Vec::new(), headers: 0, read: Vec::new() }
    }

    /// Writes `bytes` (an error: the server closed the connection).
    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.tcp.write_all(bytes).await
    }

    /// Reads the server's frames until it closes the connection or `within` passes.
    pub async fn ending(&mut self, within: Duration) -> Ending {
        let deadline = tokio::time::Instant::now() + within;
        let mut goaway = None;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match tokio::time::timeout_at(deadline, self.tcp.read(&mut buf)).await {
                Err(_) => return goaway.map_or(Ending::Open, Ending::GoAway),
                Ok(Ok(0)) | Ok(Err(_)) => return goaway.map_or(Ending::Closed, Ending::GoAway),
                Ok(Ok(n)) => self.read.extend_from_slice(&buf[..n]),
            }
            while self.read.len() >= 9 {
                let len = u32::from_be_bytes([0, self.read[0], self.read[1], self.read[2]]) as usize;
                if self.read.len() < 9 + len {
                    break;
                }
                let stream = u32::from_be_bytes([self.read[5], self.read[6], self.read[7], self.read[8]]) & 0x7fff_ffff;
                let payload = &self.read[9..9 + len];
                let code = |at: usize| payload.get(at..at + 4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                match self.read[3] {
                    kind::GOAWAY => goaway = Some(code(4)),
                    kind::RST_STREAM => self.resets.push((stream, code(0))),
                    kind::HEADERS => self.headers += 1,
                    _ => {}
                }
                self.read.drain(..9 + len);
            }
        }
    }
}

/// The resident memory of process `pid`, in KiB (Linux's /proc).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// The open file descriptors of process `pid` (sockets included).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}
