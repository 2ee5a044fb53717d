//! Parsed process models, cached by process definition key, and parsed decision requirements
//! graphs, cached by their key. Parsing happens once per key per run (at deploy, or on first
//! use after a restart), never per command.

use std::collections::HashMap;
use std::sync::Arc;

use waggle_bpmn::Process;
use waggle_dmn::Drg;
use waggle_protocol::value::ProcessRecord;

use crate::tables::StateView;

#[derive(Default)]
pub(crate) struct ProcessCache {
    by_key: HashMap<i64, Arc<Process>, foldhash::fast::RandomState>,
    /// Stored process records, decoded once (they never change once deployed).
    records: HashMap<i64, Arc<ProcessRecord>, foldhash::fast::RandomState>,
    /// Parsed decision requirements graphs by key.
    drgs: HashMap<i64, Arc<Drg>, foldhash::fast::RandomState>,
}

impl ProcessCache {
    /// The stored record of a deployed process (None when the key is not deployed).
    pub fn record(&mut self, key: i64, view: StateView<'_>) -> Option<Arc<ProcessRecord>> {
        if let Some(r) = self.records.get(&key) {
            return Some(r.clone());
        }
        let record = Arc::new(view.process(key)?);
        self.records.insert(key, record.clone());
        Some(record)
    }

    /// The model of a deployed process. Panics if the key is not deployed or its stored XML no
    /// longer parses: both are broken invariants (only valid models are ever stored); the panic
    /// is contained to the partition (the broker's `partition/supervise.rs`).
    pub fn get(&mut self, key: i64, view: StateView<'_>) -> Arc<Process> {
        if let Some(p) = self.by_key.get(&key) {
            return p.clone();
        }
        let record = self.record(key, view).unwrap_or_else(|| panic!("process {key} is not deployed"));
        let process = parse_one(&record.resource, &record.bpmn_process_id).unwrap_or_else(|| panic!("stored process {key} does not parse"));
        let process = Arc::new(process);
        self.by_key.insert(key, process.clone());
        process
    }

    pub fn insert(&mut self, key: i64, process: Arc<Process>) {
        self.by_key.insert(key, process);
    }

    /// The parsed decision requirements graph `key` (None when it is not deployed). Panics if
    /// its stored DMN no longer parses: only valid graphs are ever stored.
    pub fn drg(&mut self, key: i64, view: StateView<'_>) -> Option<Arc<Drg>> {
        if let Some(d) = self.drgs.get(&key) {
            return Some(d.clone());
        }
        let record = view.drg(key)?;
        let xml = String::from_utf8_lossy(&record.resource);
        let drg = Arc::new(waggle_dmn::parse(&xml).unwrap_or_else(|e| panic!("stored decision requirements {key} do not parse: {e}")));
        self.drgs.insert(key, drg.clone());
        Some(drg)
    }

    /// Forgets a deleted process definition.
    pub fn remove(&mut self, key: i64) {
        self.by_key.remove(&key);
        self.records.remove(&key);
    }

    pub fn insert_drg(&mut self, key: i64, drg: Arc<Drg>) {
        self.drgs.insert(key, drg);
    }

    pub fn remove_drg(&mut self, key: i64) {
        self.drgs.remove(&key);
    }
}

/// Parses a resource and returns the process with the given id.
pub(crate) fn parse_one(xml: &[u8], bpmn_id: &str) -> Option<Process> {
    // the ceiling, not the configured limits: the model was accepted by some configuration
    waggle_bpmn::parse_definitions_with(xml, &waggle_bpmn::ParseLimits::CEILING).ok()?.into_iter().find(|p| p.id == bpmn_id)
}
