//! The REST API's request body limit (`rest_max_body_size`), axum's `DefaultBodyLimit` set for
//! every route: each body extractor (`Bytes`, `Json`, `Multipart`) stops reading at the limit, so
//! no request buffers more than it (the deployment route keeps its own 4 MB limit), and the
//! answer is 413 with an RFC 9457 problem naming the limit (axum's own 413s, plain text, are
//! replaced by it). A body announced larger (`Content-Length`) is still read up to the limit,
//! not refused unread: a client still writing it would see its connection reset, not the 413.

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use waggle_rest::Problem;

/// `router` with bodies limited to `max` bytes.
pub fn limit(router: Router, max: usize) -> Router {
    router.layer(DefaultBodyLimit::max(max)).layer(axum::middleware::from_fn_with_state(max, enforce))
}

async fn enforce(State(max): State<usize>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let problem = response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !problem {
        return too_large(max);
    }
    response
}

fn too_large(max: usize) -> Response {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "PAYLOAD_TOO_LARGE",
        format!("the request body is larger than the limit of {max} bytes (rest_max_body_size)"),
    )
    .into_response()
}
