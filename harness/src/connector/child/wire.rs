//! The wire shapes of one exchange: a request as its JSON line, an `error` object as an error.

use serde_json::Value;

use super::words::quote;
use crate::connector::Request;
use crate::error::{ConnectorError, ErrorKind};

/// The request as one JSON line, with its seq.
pub(super) fn encode(request: &Request, seq: u64, what: &str) -> Result<Vec<u8>, ConnectorError> {
    let mut wire = match serde_json::to_value(request) {
        Ok(Value::Object(m)) => m,
        other => {
            return Err(ConnectorError::internal(format!(
                "could not encode {what}: {other:?}"
            )));
        }
    };
    wire.insert("seq".into(), Value::from(seq));
    let mut line = serde_json::to_vec(&Value::Object(wire)).expect("JSON values serialize");
    line.push(b'\n');
    Ok(line)
}

/// A wire `error` object as a [`ConnectorError`]; a malformed one is kind `internal`.
pub(super) fn decode_error(what: &str, err: Value) -> ConnectorError {
    let kind = err.get("kind").cloned();
    let message = err.get("message").and_then(Value::as_str);
    match (kind.map(serde_json::from_value::<ErrorKind>), message) {
        (Some(Ok(kind)), Some(message)) => ConnectorError::new(kind, message),
        (Some(Err(_)), Some(message)) => ConnectorError::internal(format!(
            "connector answered {what} with an unknown error kind {}: {message}",
            err.get("kind").map_or_else(String::new, Value::to_string)
        )),
        _ => ConnectorError::internal(format!(
            "connector answered {what} with a malformed error (want {{\"kind\", \"message\"}}): {}",
            quote(&err.to_string())
        )),
    }
}
