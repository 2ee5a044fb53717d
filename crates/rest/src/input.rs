//! Request bodies of the command endpoints: typed, with unknown fields refused, keys as strings,
//! and every mistake a 400 problem (as 8.8's gateway answers a body it cannot bind).

use bytes::Bytes;
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::Problem;

/// The only tenant without multi-tenancy (8.8 refuses others when it is off).
pub const DEFAULT_TENANT: &str = "<default>";

/// Parses a JSON body; an empty body is `{}` (every field optional) when `empty_ok`.
pub fn parse<T: DeserializeOwned>(bytes: &Bytes, empty_ok: bool) -> Result<T, Problem> {
    let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        if !empty_ok {
            return Err(Problem::bad_request("Required request body is missing"));
        }
        b"{}"
    } else {
        bytes
    };
    serde_json::from_slice(text).map_err(|e| Problem::bad_request(format!("Request property cannot be parsed: {e}")))
}

/// A path key: a positive 64-bit integer written in decimal.
pub fn path_key(text: &str) -> Result<i64, Problem> {
    text.parse::<i64>().ok().filter(|k| *k > 0).ok_or_else(|| Problem::bad_request(format!("'{text}' is not a key")))
}

/// A key in a body: a string of digits (8.8 writes keys as strings; a JSON number is accepted too).
pub fn key<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => s.parse::<i64>().ok().filter(|k| *k > 0).ok_or_else(|| D::Error::custom(format!("'{s}' is not a key"))),
        Value::Number(n) => n.as_i64().filter(|k| *k > 0).ok_or_else(|| D::Error::custom(format!("{n} is not a key"))),
        other => Err(D::Error::custom(format!("{other} is not a key"))),
    }
}

/// An optional key in a body.
pub fn opt_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(v) => key(v).map(Some).map_err(D::Error::custom),
    }
}

/// Variables as the gateway's handlers take them: a JSON object's text, or "" for none.
pub fn variables(v: &Option<Map<String, Value>>) -> String {
    v.as_ref().map(|m| Value::Object(m.clone()).to_string()).unwrap_or_default()
}

/// The tenant id a request hands the gateway: with multi-tenancy off, a tenant other than the
/// default one is refused as 8.8 refuses it, and none is handed on; with it on, the one given
/// (the gateway checks it, and the caller's right to it, as for gRPC).
pub fn tenant(multi_tenancy: bool, t: &Option<String>) -> Result<String, Problem> {
    if multi_tenancy {
        return Ok(t.clone().unwrap_or_default());
    }
    match t.as_deref() {
        None | Some(DEFAULT_TENANT) => Ok(String::new()),
        Some(other) => {
            Err(Problem::bad_request(format!("Expected to handle request with tenant identifier '{other}', but multi-tenancy is disabled")))
        }
    }
}

/// A gRPC request for the gateway carrying the REST request's authenticated caller, if any.
pub fn grpc<T>(caller: Option<axum::Extension<waggle_gateway::Caller>>, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(axum::Extension(caller)) = caller {
        request.extensions_mut().insert(caller);
    }
    request
}

/// A JSON text from the engine as a value (`{}` when empty or malformed).
pub fn document(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::Object(Map::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Body {
        #[serde(deserialize_with = "key")]
        job_key: i64,
    }

    #[test]
    fn keys_are_strings_or_numbers_and_bodies_strict() {
        let b: Body = parse(&Bytes::from_static(br#"{"jobKey":"42"}"#), false).unwrap();
        assert_eq!(b.job_key, 42);
        assert!(parse::<Body>(&Bytes::from_static(br#"{"jobKey":"x"}"#), false).is_err());
        assert!(parse::<Body>(&Bytes::from_static(br#"{"jobKey":"1","other":1}"#), false).is_err());
        assert!(parse::<Body>(&Bytes::from_static(b""), false).is_err());
        assert!(tenant(false, &Some("t1".into())).is_err());
        assert_eq!(tenant(false, &Some("<default>".into())).unwrap(), "");
        assert_eq!(tenant(true, &Some("t1".into())).unwrap(), "t1");
    }
}
