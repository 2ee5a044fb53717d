//! The encoding of [`ProcessInstanceRecord`]: its fields in order, as `derive` would write them,
//! except that `parent_element_instance_key` follows only when `parent_process_instance_key` is
//! a key (> 0), that is, for the records of an instance a call activity created. Every record
//! written before call activities existed has -1 or 0 there, so logs and state written then
//! decode unchanged, and records without a parent still encode byte for byte as they did.
//! Without a parent, `parent_element_instance_key` equals `parent_process_instance_key` (-1, or
//! 0 in a default record): that is what decoding gives back.

use std::fmt;

use serde::de::{Error, SeqAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ProcessInstanceRecord;

const FIELDS: &[&str] = &[
    "bpmn_process_id",
    "version",
    "process_definition_key",
    "process_instance_key",
    "element_id",
    "flow_scope_key",
    "bpmn_element_type",
    "parent_process_instance_key",
    "tenant_id",
    "parent_element_instance_key",
];

fn has_parent(parent_process_instance_key: i64) -> bool {
    parent_process_instance_key > 0
}

impl Serialize for ProcessInstanceRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let child = has_parent(self.parent_process_instance_key);
        let mut s = serializer.serialize_struct("ProcessInstanceRecord", if child { 10 } else { 9 })?;
        s.serialize_field("bpmn_process_id", &self.bpmn_process_id)?;
        s.serialize_field("version", &self.version)?;
        s.serialize_field("process_definition_key", &self.process_definition_key)?;
        s.serialize_field("process_instance_key", &self.process_instance_key)?;
        s.serialize_field("element_id", &self.element_id)?;
        s.serialize_field("flow_scope_key", &self.flow_scope_key)?;
        s.serialize_field("bpmn_element_type", &self.bpmn_element_type)?;
        s.serialize_field("parent_process_instance_key", &self.parent_process_instance_key)?;
        s.serialize_field("tenant_id", &self.tenant_id)?;
        if child {
            s.serialize_field("parent_element_instance_key", &self.parent_element_instance_key)?;
        }
        s.end()
    }
}

impl<'de> Deserialize<'de> for ProcessInstanceRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = ProcessInstanceRecord;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a process instance record")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ProcessInstanceRecord, A::Error> {
                let mut read = 0;
                macro_rules! field {
                    () => {{
                        read += 1;
                        seq.next_element()?.ok_or_else(|| A::Error::invalid_length(read - 1, &self))?
                    }};
                }
                let mut record = ProcessInstanceRecord {
                    bpmn_process_id: field!(),
                    version: field!(),
                    process_definition_key: field!(),
                    process_instance_key: field!(),
                    element_id: field!(),
                    flow_scope_key: field!(),
                    bpmn_element_type: field!(),
                    parent_process_instance_key: field!(),
                    tenant_id: field!(),
                    parent_element_instance_key: 0,
                };
                record.parent_element_instance_key = if has_parent(record.parent_process_instance_key) {
                    field!()
                } else {
                    // not written: the same "none" as the parent process instance's key
                    record.parent_process_instance_key
                };
                Ok(record)
            }
        }
        deserializer.deserialize_struct("ProcessInstanceRecord", FIELDS, Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived encoding of the record as it was before `parent_element_instance_key`.
    #[derive(Serialize)]
    struct Before<'a> {
        bpmn_process_id: &'a str,
        version: i32,
        process_definition_key: i64,
        process_instance_key: i64,
        element_id: &'a str,
        flow_scope_key: i64,
        bpmn_element_type: &'a str,
        parent_process_instance_key: i64,
        tenant_id: &'a str,
    }

    fn record(parent: i64, parent_element: i64) -> ProcessInstanceRecord {
        ProcessInstanceRecord {
            bpmn_process_id: "order".into(),
            version: 3,
            process_definition_key: 7,
            process_instance_key: 9,
            element_id: "task".into(),
            flow_scope_key: 9,
            bpmn_element_type: "SERVICE_TASK".into(),
            parent_process_instance_key: parent,
            tenant_id: "<default>".into(),
            parent_element_instance_key: parent_element,
        }
    }

    #[test]
    fn a_record_without_parent_encodes_as_before() {
        for parent in [-1, 0] {
            let r = record(parent, parent);
            let before = Before {
                bpmn_process_id: "order",
                version: 3,
                process_definition_key: 7,
                process_instance_key: 9,
                element_id: "task",
                flow_scope_key: 9,
                bpmn_element_type: "SERVICE_TASK",
                parent_process_instance_key: parent,
                tenant_id: "<default>",
            };
            let bytes = postcard::to_allocvec(&r).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&before).unwrap());
            assert_eq!(postcard::from_bytes::<ProcessInstanceRecord>(&bytes).unwrap(), r);
        }
    }

    #[test]
    fn a_child_record_keeps_both_parent_keys_and_what_follows() {
        let r = record(2_251_799_813_685_249, 2_251_799_813_685_260);
        let bytes = postcard::to_allocvec(&(r.clone(), 42u8)).unwrap();
        assert_eq!(postcard::from_bytes::<(ProcessInstanceRecord, u8)>(&bytes).unwrap(), (r, 42));
    }
}
