use std::path::Path;

use rocksdb::{checkpoint::Checkpoint, Direction, IteratorMode, Options, WriteBatch, WriteOptions, DB};

use crate::{KvIter, KvRead, KvStore, StateError, WriteSet};

/// RocksDB-backed state in a single column family (keys carry their table prefix), so a flush
/// is always atomic across tables.
///
/// Writes skip RocksDB's WAL: the partition's log is the source of truth, and the store records
/// the log position it has applied in the same batch, so after a crash the broker replays the
/// log from that position.
pub struct RocksStore {
    db: DB,
}

impl RocksStore {
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts.increase_parallelism(2);
        let db = DB::open(&opts, dir)?;
        Ok(Self { db })
    }

    /// Writes a consistent checkpoint (hard links where possible) into `dir`, which must not
    /// exist. Flushes the memtable first, so the checkpoint holds every committed write.
    pub fn checkpoint(&self, dir: &Path) -> Result<(), StateError> {
        self.db.flush()?;
        Checkpoint::new(&self.db)?.create_checkpoint(dir)?;
        Ok(())
    }
}

impl KvRead for RocksStore {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        match self.db.get(key) {
            Ok(v) => v,
            Err(e) => panic!("state read failed (partition must restart): {e}"),
        }
    }

    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_> {
        let prefix = prefix.to_vec();
        let iter = self.db.iterator(IteratorMode::From(&prefix, Direction::Forward));
        Box::new(
            iter.map(|item| match item {
                Ok((k, v)) => (k.into_vec(), v.into_vec()),
                Err(e) => panic!("state scan failed (partition must restart): {e}"),
            })
            .take_while(move |(k, _)| k.starts_with(&prefix)),
        )
    }
}

impl KvStore for RocksStore {
    fn commit(&self, writes: &WriteSet) -> Result<(), StateError> {
        let mut batch = WriteBatch::default();
        for (k, v) in writes.iter() {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            }
        }
        let mut opts = WriteOptions::default();
        opts.disable_wal(true);
        self.db.write_opt(batch, &opts)?;
        Ok(())
    }
}
