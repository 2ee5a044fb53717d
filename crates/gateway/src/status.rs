//! gRPC status codes and messages, as Zeebe's gateway maps them.

use tonic::{Code, Status};
use waggle_broker::BrokerError;
use waggle_protocol::{Record, RejectionType};

/// A rejection as Zeebe's gateway reports it:
/// "Command 'CREATE' rejected with code 'NOT_FOUND': <reason>".
pub fn rejection(record: &Record) -> Status {
    let rejection = record.rejection.as_ref().expect("a rejection record");
    let code = match rejection.rejection_type {
        RejectionType::InvalidArgument => Code::InvalidArgument,
        RejectionType::NotFound => Code::NotFound,
        RejectionType::AlreadyExists => Code::AlreadyExists,
        RejectionType::InvalidState => Code::FailedPrecondition,
        RejectionType::ProcessingError => Code::Internal,
        RejectionType::ExceededBatchRecordSize => Code::ResourceExhausted,
    };
    Status::new(
        code,
        format!("Command '{}' rejected with code '{}': {}", record.intent, rejection.rejection_type.as_str(), rejection.reason),
    )
}

pub fn broker(error: BrokerError) -> Status {
    match error {
        BrokerError::Overloaded => Status::resource_exhausted(
            "Expected to handle gRPC request, but request could not be processed due to back pressure. Retry later.",
        ),
        BrokerError::NoSuchPartition(p) => {
            Status::not_found(format!("Expected a key of an existing partition, but partition {p} does not exist"))
        }
        other => Status::unavailable(other.to_string()),
    }
}

pub fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message.into())
}

/// Checks that a variables document is empty or a JSON object (Zeebe's gateway wording).
pub fn check_variables(field: &str, text: &str) -> Result<(), Status> {
    if text.trim().is_empty() {
        return Ok(());
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(other) => Err(invalid(format!(
            "Property '{field}' is invalid: Expected document to be a root level object, but was '{}'",
            match other {
                serde_json::Value::Array(_) => "ARRAY",
                serde_json::Value::String(_) => "STRING",
                serde_json::Value::Number(_) => "INTEGER",
                serde_json::Value::Bool(_) => "BOOLEAN",
                _ => "NIL",
            }
        ))),
        Err(e) => Err(invalid(format!("Property '{field}' is invalid: Expected document to be valid JSON, but it was not: {e}"))),
    }
}
