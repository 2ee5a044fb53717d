//! [`SharedStr`]: an immutable string that is cheap to clone.
//!
//! A process instance's records repeat their element's process id, element id, element type
//! and tenant at every step of its lifecycle; with `String` each step copied all four. Encoded
//! exactly as a `String` (postcard, JSON), so stored state and log entries do not change.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable string; clones share the text (or point at a static one).
#[derive(Clone)]
pub struct SharedStr(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl SharedStr {
    /// A string for a static text, without allocating.
    pub const fn from_static(s: &'static str) -> Self {
        SharedStr(Repr::Static(s))
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Static(s) => s,
            Repr::Shared(s) => s,
        }
    }
}

impl Default for SharedStr {
    fn default() -> Self {
        SharedStr::from_static("")
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        SharedStr::from(s.as_str())
    }
}

/// The static text equal to `s`, for the texts most records carry: the default tenant, an empty
/// JSON object, and Zeebe's BPMN element type names. Kept static, they allocate nothing and
/// their clones and drops touch no reference count.
fn well_known(s: &str) -> Option<&'static str> {
    macro_rules! texts {
        ($($text:literal),* $(,)?) => {
            match s {
                $($text => Some($text),)*
                _ => None,
            }
        };
    }
    texts!(
        "<default>",
        "{}",
        "PROCESS",
        "SUB_PROCESS",
        "EVENT_SUB_PROCESS",
        "START_EVENT",
        "INTERMEDIATE_CATCH_EVENT",
        "INTERMEDIATE_THROW_EVENT",
        "BOUNDARY_EVENT",
        "END_EVENT",
        "SERVICE_TASK",
        "RECEIVE_TASK",
        "USER_TASK",
        "MANUAL_TASK",
        "TASK",
        "EXCLUSIVE_GATEWAY",
        "INCLUSIVE_GATEWAY",
        "PARALLEL_GATEWAY",
        "EVENT_BASED_GATEWAY",
        "SEQUENCE_FLOW",
        "MULTI_INSTANCE_BODY",
        "CALL_ACTIVITY",
        "BUSINESS_RULE_TASK",
        "SCRIPT_TASK",
        "SEND_TASK",
    )
}

impl From<&str> for SharedStr {
    /// Shares a copy of `s`; the empty string and the [`well_known`] texts allocate nothing.
    fn from(s: &str) -> Self {
        if s.is_empty() {
            return SharedStr::default();
        }
        if let Some(known) = well_known(s) {
            return SharedStr::from_static(known);
        }
        SharedStr(Repr::Shared(s.into()))
    }
}

impl From<&String> for SharedStr {
    fn from(s: &String) -> Self {
        SharedStr::from(s.as_str())
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.as_str().to_string()
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for SharedStr {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.as_str(), other.as_str());
        // clones share their text: equal without comparing it
        std::ptr::eq(a, b) || a == b
    }
}

impl Eq for SharedStr {}

impl PartialOrd for SharedStr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedStr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for SharedStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == other.as_str()
    }
}

impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SharedStr {
    /// Copies the text once, into the shared allocation (no `String` in between).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = SharedStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SharedStr, E> {
                Ok(SharedStr::from(v))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    fn is_static(s: &SharedStr) -> bool {
        matches!(s.0, Repr::Static(_))
    }

    #[test]
    fn well_known_texts_are_static_whichever_way_they_come() {
        for text in ["<default>", "{}", "SERVICE_TASK", "SEQUENCE_FLOW"] {
            assert!(is_static(&SharedStr::from(text)), "{text}");
            assert!(is_static(&SharedStr::from(text.to_string())), "{text}");
            let decoded: SharedStr = postcard::from_bytes(&postcard::to_stdvec(text).unwrap()).unwrap();
            assert!(is_static(&decoded) && decoded == *text, "{text}");
        }
        assert!(!is_static(&SharedStr::from("<default>x")));
        assert!(!is_static(&SharedStr::from("tenant-a")));
    }

    use super::*;

    #[test]
    fn encodes_as_a_string_and_compares_by_text() {
        let shared = SharedStr::from("task");
        let fixed = SharedStr::from_static("task");
        assert_eq!(shared, fixed);
        assert_eq!(shared, "task");
        assert_eq!("task".to_string(), shared);
        assert_eq!(postcard::to_stdvec(&shared).unwrap(), postcard::to_stdvec("task").unwrap());
        let back: SharedStr = postcard::from_bytes(&postcard::to_stdvec(&"task".to_string()).unwrap()).unwrap();
        assert_eq!(back, shared);
        assert_eq!(serde_json::to_string(&fixed).unwrap(), "\"task\"");
        assert_eq!(SharedStr::default(), "");
        let empty: SharedStr = postcard::from_bytes(&postcard::to_stdvec("").unwrap()).unwrap();
        assert!(matches!(empty.0, Repr::Static("")), "an empty text is not allocated");
        let escaped: SharedStr = serde_json::from_str("\"a\\\"b\"").unwrap();
        assert_eq!(escaped, "a\"b", "a JSON text with escapes (not borrowed from the input)");
    }
}
