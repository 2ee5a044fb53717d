//! RFC 9457 problem details, as the 8.8 API answers errors
//! (`{type, title, status, detail, instance}` with `application/problem+json`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use waggle_store::StoreError;

/// An error answer.
#[derive(Debug, Clone)]
pub struct Problem {
    pub status: StatusCode,
    /// Camunda writes the gRPC-style code here (`INVALID_ARGUMENT`, `NOT_FOUND`, ...).
    pub title: String,
    pub detail: String,
}

impl Problem {
    pub fn new(status: StatusCode, title: &str, detail: impl Into<String>) -> Self {
        Self { status, title: title.into(), detail: detail.into() }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", detail)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = json!({
            "type": "about:blank",
            "title": self.title,
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        (self.status, [(header::CONTENT_TYPE, "application/problem+json")], body.to_string()).into_response()
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(m) => Problem::bad_request(m),
            StoreError::NotFound(m) => Problem::not_found(m),
            StoreError::Sql(e) => {
                tracing::warn!(error = %e, "query store read failed");
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", e.to_string())
            }
            // a newer store is refused when it is opened: only a connection opened later sees it
            e @ StoreError::NewerSchema { .. } => Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", e.to_string()),
        }
    }
}

/// A gRPC status from the gateway's handlers as the 8.8 API maps it.
impl From<tonic::Status> for Problem {
    fn from(s: tonic::Status) -> Self {
        use tonic::Code;
        let (status, title) = match s.code() {
            Code::InvalidArgument | Code::OutOfRange => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
            Code::NotFound => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            Code::AlreadyExists => (StatusCode::CONFLICT, "ALREADY_EXISTS"),
            Code::FailedPrecondition => (StatusCode::CONFLICT, "INVALID_STATE"),
            Code::ResourceExhausted => (StatusCode::SERVICE_UNAVAILABLE, "RESOURCE_EXHAUSTED"),
            Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
            Code::DeadlineExceeded => (StatusCode::GATEWAY_TIMEOUT, "DEADLINE_EXCEEDED"),
            Code::PermissionDenied => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            Code::Unauthenticated => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
        };
        Problem::new(status, title, s.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_pressure_is_503_resource_exhausted_and_bad_input_400() {
        let p = Problem::from(tonic::Status::resource_exhausted("partition 1 is overloaded"));
        assert_eq!((p.status, p.title.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "RESOURCE_EXHAUSTED"));
        let p = Problem::from(tonic::Status::invalid_argument("no"));
        assert_eq!((p.status, p.title.as_str()), (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"));
        let p = Problem::from(StoreError::Invalid("unknown field".into()));
        assert_eq!(p.status, StatusCode::BAD_REQUEST);
        let p = Problem::from(tonic::Status::not_found("gone"));
        assert_eq!(p.status, StatusCode::NOT_FOUND);
    }
}
