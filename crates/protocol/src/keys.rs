//! Keys as in Zeebe: `key = partition_id << 51 | counter`, so any key routes to its partition.

/// Partition ids start at 1, as in Zeebe.
pub type PartitionId = u16;

/// Number of low bits holding the per-partition counter.
pub const KEY_COUNTER_BITS: u32 = 51;
const COUNTER_MASK: i64 = (1i64 << KEY_COUNTER_BITS) - 1;

/// Builds the key for `counter` on `partition`.
pub fn encode_key(partition: PartitionId, counter: i64) -> i64 {
    debug_assert!((0..=COUNTER_MASK).contains(&counter), "key counter overflow");
    ((partition as i64) << KEY_COUNTER_BITS) | (counter & COUNTER_MASK)
}

/// The partition a key was generated on (0 for keys that are not Zeebe keys, e.g. -1).
pub fn partition_of(key: i64) -> PartitionId {
    if key <= 0 {
        return 0;
    }
    (key >> KEY_COUNTER_BITS) as PartitionId
}

/// The partition that holds the messages of a correlation key among `partition_count`
/// partitions: Java's `String.hashCode` of the key, as Zeebe's SubscriptionUtil uses.
pub fn partition_of_correlation_key(correlation_key: &str, partition_count: u32) -> PartitionId {
    let hash = correlation_key.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    (hash.unsigned_abs() % partition_count.max(1)) as PartitionId + 1
}

/// The counter part of a key.
pub fn key_counter(key: i64) -> i64 {
    key & COUNTER_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_partition_and_counter() {
        let key = encode_key(3, 42);
        assert_eq!(partition_of(key), 3);
        assert_eq!(key_counter(key), 42);
        // Zeebe's first key on partition 1
        assert_eq!(encode_key(1, 1), 2251799813685249);
    }

    #[test]
    fn non_keys_have_no_partition() {
        assert_eq!(partition_of(-1), 0);
        assert_eq!(partition_of(0), 0);
    }
}
