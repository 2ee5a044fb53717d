//! Waggle's wire and log vocabulary.
//!
//! Owns: record types, value types and intents (mirroring Zeebe's), keys (which carry their
//! partition), the versioned binary encoding of log entries, and the gRPC types generated from
//! Zeebe 8.5's `gateway.proto`. Owns no behaviour: no IO, no engine logic.
//!
//! Contract for callers: a key's partition is `partition_of(key)`; a log entry decodes only with
//! the codec version it was written with (see [`codec`]).

pub mod codec;
pub mod grpc_frame;
pub mod keys;
pub mod postcard_vec;
pub mod record;
mod shared_str;
pub mod value;

pub use keys::{encode_key, key_counter, partition_of, PartitionId};
pub use record::{Intent, Record, RecordType, RejectionType, ValueType};
pub use shared_str::SharedStr;
pub use value::RecordValue;

/// The tenant of everything when multi-tenancy is off (Zeebe's `TenantOwned.DEFAULT_TENANT_IDENTIFIER`).
pub const DEFAULT_TENANT: &str = "<default>";

/// Whether `tenant` is the default tenant (an empty id, as older records carry, counts as it).
pub fn is_default_tenant(tenant: &str) -> bool {
    tenant.is_empty() || tenant == DEFAULT_TENANT
}

/// Types generated from Zeebe's `gateway_protocol` package (gateway.proto, Zeebe 8.5).
pub mod gateway {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("gateway_protocol");
}
