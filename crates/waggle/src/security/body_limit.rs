//! The REST API's request body limit (`rest_max_body_size`): a body announced larger
//! (`Content-Length`) is refused before it is read, and any other body is cut off at the limit
//! while it is read, so no request buffers more than the limit. Either way the answer is 413
//! with an RFC 9457 problem naming the limit (axum's own 413s, plain text, are replaced by it).

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use waggle_rest::Problem;

/// `router` with bodies limited to `max` bytes.
pub fn limit(router: Router, max: usize) -> Router {
    // axum's own default (2 MB) gives way to ours; the deployment route keeps its own (4 MB)
    // below it
    router.layer(DefaultBodyLimit::disable()).layer(axum::middleware::from_fn_with_state(max, enforce))
}

async fn enforce(State(max): State<usize>, request: Request, next: Next) -> Response {
    let announced = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if announced.is_some_and(|n| n > max as u64) {
        return too_large(max);
    }
    let (parts, body) = request.into_parts();
    let request = Request::from_parts(parts, Body::new(http_body_util::Limited::new(body, max)));
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
