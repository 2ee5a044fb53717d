//! The client against the `h2` crate's server over real loopback sockets: flow control both ways,
//! the server's stream limit, server streams, gRPC errors, resets and GOAWAY.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderMap, HeaderValue, Request, Response};
use tokio::sync::Notify;
use tonic::Code;

use super::*;

const TEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves one connection at a fresh loopback address with `handler` per request; `shutdown`
/// makes the server send GOAWAY.
async fn serve<F, Fut>(builder: h2::server::Builder, handler: F, shutdown: Arc<Notify>) -> String
where
    F: Fn(Request<RecvStream>, SendResponse<Bytes>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut connection = builder.handshake::<_, Bytes>(tcp).await.unwrap();
        let handler = Arc::new(handler);
        loop {
            tokio::select! {
                request = connection.accept() => match request {
                    Some(Ok((request, respond))) => {
                        tokio::spawn(handler(request, respond));
                    }
                    _ => break,
                },
                _ = shutdown.notified() => connection.graceful_shutdown(),
            }
        }
    });
    address
}

fn framed(message: &[u8]) -> Bytes {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

async fn read_body(mut body: RecvStream) -> Vec<u8> {
    let mut out = vec![];
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        out.extend_from_slice(&chunk);
    }
    out
}

fn grpc_headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for &(name, value) in pairs {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
}

fn ok_response() -> Response<()> {
    Response::builder().header("content-type", "application/grpc").body(()).unwrap()
}

/// Answers with the request's body (a framed message) and grpc-status 0.
async fn echo(request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
    let body = read_body(request.into_body()).await;
    let mut send = respond.send_response(ok_response(), false).unwrap();
    send.send_data(body.into(), false).unwrap();
    send.send_trailers(grpc_headers(&[("grpc-status", "0")])).unwrap();
}

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, f).await.expect("the test hung")
}

#[tokio::test]
async fn unary_calls_and_grpc_errors() {
    let handler = |request: Request<RecvStream>, mut respond: SendResponse<Bytes>| async move {
        match request.uri().path() {
            "/t.T/Echo" => echo(request, respond).await,
            "/t.T/Busy" => {
                // trailers-only: the status in the one header block
                let mut response = ok_response();
                response.headers_mut().extend(grpc_headers(&[("grpc-status", "8"), ("grpc-message", "too%20busy")]));
                respond.send_response(response, true).unwrap();
            }
            _ => {
                let _ = read_body(request.into_body()).await;
                let mut send = respond.send_response(ok_response(), false).unwrap();
                send.send_data(framed(b"ignored"), false).unwrap();
                send.send_trailers(grpc_headers(&[("grpc-status", "5"), ("grpc-message", "no such thing")])).unwrap();
            }
        }
    };
    let address = serve(h2::server::Builder::new(), handler, Arc::default()).await;
    let client = within(connect(&address)).await.unwrap();
    let (echo, busy, missing) = (client.method("/t.T/Echo"), client.method("/t.T/Busy"), client.method("/t.T/Missing"));
    for i in 0..50u32 {
        let message = format!("message {i}");
        let answer = within(client.unary(&echo, framed(message.as_bytes()))).await.unwrap();
        assert_eq!(answer, message.as_bytes());
        let status = within(client.unary(&busy, framed(b"x"))).await.unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::ResourceExhausted, "too busy"));
        let status = within(client.unary(&missing, framed(b"x"))).await.unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::NotFound, "no such thing"));
    }
    let empty = within(client.unary(&echo, framed(b""))).await.unwrap();
    assert!(empty.is_empty());
}

/// A request larger than the server's stream and connection windows and its frame size waits for
/// WINDOW_UPDATEs; an answer as large comes back in many frames.
#[tokio::test]
async fn large_messages_respect_flow_control_both_ways() {
    let mut builder = h2::server::Builder::new();
    builder.initial_window_size(1000);
    let address = serve(builder, echo, Arc::default()).await;
    let client = within(connect(&address)).await.unwrap();
    let method = client.method("/t.T/Echo");
    let message: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let calls: Vec<_> = (0..3).map(|_| client.unary(&method, framed(&message))).collect();
    for answer in within(futures::future::join_all(calls)).await {
        assert_eq!(answer.unwrap(), message);
    }
}

/// More calls than the server allows streams at once all complete: the rest wait their turn.
#[tokio::test]
async fn calls_beyond_the_stream_limit_wait() {
    let mut builder = h2::server::Builder::new();
    builder.max_concurrent_streams(2);
    let slow_echo = |request, respond| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        echo(request, respond).await
    };
    let address = serve(builder, slow_echo, Arc::default()).await;
    let client = within(connect(&address)).await.unwrap();
    let method = client.method("/t.T/Echo");
    let calls: Vec<_> = (0..40u32).map(|i| client.unary(&method, framed(&i.to_be_bytes()))).collect();
    for (i, answer) in within(futures::future::join_all(calls)).await.into_iter().enumerate() {
        assert_eq!(answer.unwrap(), &(i as u32).to_be_bytes()[..]);
    }
}

/// A server stream carrying more than the stream and connection windows, with messages split
/// across DATA frames, then an error status.
#[tokio::test]
async fn server_streams_return_window_as_messages_are_consumed() {
    const MESSAGES: usize = 70;
    const SIZE: usize = 100_000;
    let handler = |request: Request<RecvStream>, mut respond: SendResponse<Bytes>| async move {
        let _ = read_body(request.into_body()).await;
        let mut send = respond.send_response(ok_response(), false).unwrap();
        for i in 0..MESSAGES {
            let message = framed(&vec![i as u8; SIZE]);
            let (first, second) = message.split_at(SIZE / 3);
            send.send_data(Bytes::copy_from_slice(first), false).unwrap();
            send.send_data(Bytes::copy_from_slice(second), false).unwrap();
        }
        send.send_trailers(grpc_headers(&[("grpc-status", "5"), ("grpc-message", "gone")])).unwrap();
    };
    let address = serve(h2::server::Builder::new(), handler, Arc::default()).await;
    let client = within(connect(&address)).await.unwrap();
    let mut stream = client.server_stream(&client.method("/t.T/Stream"), framed(b"go"));
    for i in 0..MESSAGES {
        let message = within(stream.next()).await.expect("a message").unwrap();
        assert_eq!((message.len(), message[0], message[SIZE - 1]), (SIZE, i as u8, i as u8));
    }
    let status = within(stream.next()).await.expect("the status").unwrap_err();
    assert_eq!((status.code(), status.message()), (Code::NotFound, "gone"));
    assert!(within(stream.next()).await.is_none());
}

/// Dropping a server stream resets it on the server.
#[tokio::test]
async fn dropping_a_stream_cancels_it() {
    let (reset_tx, reset_rx) = tokio::sync::oneshot::channel();
    let reset_tx = Arc::new(std::sync::Mutex::new(Some(reset_tx)));
    let handler = move |request: Request<RecvStream>, mut respond: SendResponse<Bytes>| {
        let reset_tx = reset_tx.clone();
        async move {
            let _ = read_body(request.into_body()).await;
            let mut send = respond.send_response(ok_response(), false).unwrap();
            send.send_data(framed(b"first"), false).unwrap();
            let reason = std::future::poll_fn(|cx| send.poll_reset(cx)).await.unwrap();
            let _ = reset_tx.lock().unwrap().take().unwrap().send(reason);
        }
    };
    let address = serve(h2::server::Builder::new(), handler, Arc::default()).await;
    let client = within(connect(&address)).await.unwrap();
    let mut stream = client.server_stream(&client.method("/t.T/Stream"), framed(b"go"));
    assert_eq!(within(stream.next()).await.unwrap().unwrap(), &b"first"[..]);
    drop(stream);
    assert_eq!(within(reset_rx).await.unwrap(), h2::Reason::CANCEL);
}

/// A reset stream fails its call; after GOAWAY new calls fail at once instead of hanging.
#[tokio::test]
async fn resets_and_goaway_fail_calls() {
    let handler = |request: Request<RecvStream>, mut respond: SendResponse<Bytes>| async move {
        match request.uri().path() {
            "/t.T/Refuse" => respond.send_reset(h2::Reason::REFUSED_STREAM),
            _ => echo(request, respond).await,
        }
    };
    let shutdown = Arc::new(Notify::new());
    let address = serve(h2::server::Builder::new(), handler, shutdown.clone()).await;
    let client = within(connect(&address)).await.unwrap();
    let (echo_method, refuse) = (client.method("/t.T/Echo"), client.method("/t.T/Refuse"));
    assert_eq!(within(client.unary(&refuse, framed(b"x"))).await.unwrap_err().code(), Code::Unavailable);
    assert_eq!(within(client.unary(&echo_method, framed(b"still fine"))).await.unwrap(), &b"still fine"[..]);
    shutdown.notify_one();
    let mut failed = None;
    for _ in 0..100 {
        match within(client.unary(&echo_method, framed(b"x"))).await {
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(status) => {
                failed = Some(status);
                break;
            }
        }
    }
    assert_eq!(failed.expect("calls keep succeeding after GOAWAY").code(), Code::Unavailable);
}
