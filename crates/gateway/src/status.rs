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
        // a correlation key moving to another partition (Waggle's own): retryable
        RejectionType::Unavailable => Code::Unavailable,
    };
    Status::new(
        code,
        bounded(format!("Command '{}' rejected with code '{}': {}", record.intent, rejection.rejection_type.as_str(), rejection.reason)),
    )
}

/// Longest status message sent whole, in bytes. The message travels in a header, and clients
/// refuse header lists beyond 8 KB (grpc-java, grpc-python): a deployment's list of errors
/// could be longer, and the client would then see a protocol error instead of the status.
pub const MAX_MESSAGE_BYTES: usize = 4_000;

/// The message, cut to [`MAX_MESSAGE_BYTES`] (at a character boundary) with a note when longer.
pub fn bounded(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let mut cut = MAX_MESSAGE_BYTES - 100;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... (message cut: {} of {} bytes shown)", &message[..cut], cut, message.len())
}

pub fn broker(error: BrokerError) -> Status {
    match error {
        BrokerError::Overloaded => Status::resource_exhausted(
            "Expected to handle gRPC request, but request could not be processed due to back pressure. Retry later.",
        ),
        // Zeebe's words (CommandApiRequestHandler): "Cannot accept requests for partition N.
        // Broker is out of disk space"
        e @ BrokerError::DiskSpaceLow(_) => Status::resource_exhausted(e.to_string()),
        BrokerError::NoSuchPartition(p) => {
            Status::not_found(format!("Expected a key of an existing partition, but partition {p} does not exist"))
        }
        other => Status::unavailable(other.to_string()),
    }
}

pub fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(bounded(message.into()))
}

/// Checks that a variables document is empty or a JSON object (Zeebe's gateway wording).
pub fn check_variables(field: &str, text: &str) -> Result<(), Status> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(());
    }
    // syntax only, without building the document (the engine parses it once more anyway)
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Err(invalid(format!("Property '{field}' is invalid: Expected document to be valid JSON, but it was not: {e}")));
    }
    let kind = match text.as_bytes()[0] {
        b'{' => return Ok(()),
        b'[' => "ARRAY",
        b'"' => "STRING",
        b't' | b'f' => "BOOLEAN",
        b'n' => "NIL",
        _ => "INTEGER",
    };
    Err(invalid(format!("Property '{field}' is invalid: Expected document to be a root level object, but was '{kind}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_must_be_a_json_object() {
        assert!(check_variables("variables", "").is_ok());
        assert!(check_variables("variables", r#" {"a": [1, {"b": null}]} "#).is_ok());
        let kind = |text: &str| check_variables("variables", text).unwrap_err().message().to_string();
        assert!(kind("[1]").ends_with("but was 'ARRAY'"), "{}", kind("[1]"));
        assert!(kind("\"x\"").ends_with("but was 'STRING'"));
        assert!(kind("-1.5").ends_with("but was 'INTEGER'"));
        assert!(kind("true").ends_with("but was 'BOOLEAN'"));
        assert!(kind("null").ends_with("but was 'NIL'"));
        assert!(kind(r#"{"a": }"#).contains("Expected document to be valid JSON, but it was not: expected value at line 1 column 7"));
        assert_eq!(check_variables("variables", "{").unwrap_err().code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn long_messages_are_cut_with_a_note() {
        assert_eq!(bounded("short".into()), "short");
        let long = "é".repeat(5_000);
        let cut = bounded(long.clone());
        assert!(cut.len() <= MAX_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with(&format!("of {} bytes shown)", long.len())), "{cut}");
        assert!(long.starts_with(cut.split("...").next().unwrap()));
    }
}
