//! The debug exporter: every record as one line of Zeebe's record JSON ([`crate::json`]), to a
//! file or to standard output (Zeebe's debug exporter logs them).
//!
//! Every partition's instance writes to the same sink, a whole batch of lines per write under
//! one lock, so lines never interleave. A file is appended to; each flush is written and
//! fdatasynced before its last position is acknowledged, so after a crash every acknowledged
//! record is in the file, and records after it come again (at least once: a reader dedups by
//! partition and position). A line cut by a crash is removed when the file is opened.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use waggle_protocol::{PartitionId, Record};

use crate::{json, Context, Controller, ExportError, Exporter, ExporterFactory};

/// Where the lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Stdout,
    File(PathBuf),
}

enum Sink {
    Stdout,
    File(File),
}

impl Sink {
    fn write_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Sink::File(f) => {
                f.write_all(bytes)?;
                f.sync_data()
            }
        }
    }
}

/// The factory of debug exporters sharing one sink. For a file, opens it (creating it and its
/// folder) and cuts a line a crash left unfinished.
pub fn factory(id: impl Into<String>, target: &Target) -> Result<ExporterFactory, ExportError> {
    let sink = match target {
        Target::Stdout => Sink::Stdout,
        Target::File(path) => Sink::File(open_file(path)?),
    };
    let sink = Arc::new(Mutex::new(sink));
    Ok(ExporterFactory::new(id, move || {
        Box::new(DebugExporter { sink: sink.clone(), partition: 0, lines: Vec::new(), last: 0 }) as Box<dyn Exporter>
    }))
}

fn open_file(path: &Path) -> Result<File, ExportError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
    let len = file.metadata()?.len();
    if len > 0 {
        // the position after the last line break: what follows it was never acknowledged
        let mut tail = Vec::new();
        let mut start = len;
        while start > 0 {
            let from = start.saturating_sub(64 * 1024);
            let mut chunk = vec![0; (start - from) as usize];
            file.seek(SeekFrom::Start(from))?;
            file.read_exact(&mut chunk)?;
            chunk.extend_from_slice(&tail);
            tail = chunk;
            if let Some(at) = tail.iter().rposition(|&b| b == b'\n') {
                start = from + at as u64 + 1;
                break;
            }
            start = from;
        }
        if start < len {
            file.set_len(start)?;
            file.sync_all()?;
        }
    }
    Ok(file)
}

/// One partition's debug exporter.
pub struct DebugExporter {
    sink: Arc<Mutex<Sink>>,
    partition: PartitionId,
    /// Lines exported since the last flush.
    lines: Vec<u8>,
    /// The position of the last record in `lines`.
    last: u64,
}

impl Exporter for DebugExporter {
    fn configure(&mut self, context: &Context) -> Result<(), ExportError> {
        self.partition = context.partition_id;
        Ok(())
    }

    fn export(&mut self, record: &Record, controller: &mut Controller) -> Result<(), ExportError> {
        self.lines.extend_from_slice(json::to_json(self.partition, record).as_bytes());
        self.lines.push(b'\n');
        self.last = record.position;
        if self.lines.len() >= 1 << 20 {
            // a long catch-up: write as it goes rather than hold it all
            self.write_out(controller)?;
        }
        Ok(())
    }

    fn flush(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        self.write_out(controller)
    }
}

impl DebugExporter {
    fn write_out(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        if self.lines.is_empty() {
            return Ok(());
        }
        self.sink.lock().expect("debug exporter sink").write_durably(&self.lines)?;
        self.lines.clear();
        controller.acknowledge(self.last);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waggle_protocol::record::{Intent, RecordType, ValueType};
    use waggle_protocol::value::SignalRecord;
    use waggle_protocol::RecordValue;

    fn signal(position: u64) -> Record {
        Record {
            position,
            source_position: 0,
            key: -1,
            timestamp_ms: 1,
            record_type: RecordType::Command,
            value_type: ValueType::Signal,
            intent: Intent::Broadcast,
            rejection: None,
            value: RecordValue::Signal(SignalRecord { signal_name: "s".into(), ..Default::default() }),
        }
    }

    #[test]
    fn writes_lines_on_flush_and_acknowledges_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out").join("records.jsonl");
        // a line cut by a crash is dropped when the file is opened
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"position\":1}\n{\"posit").unwrap();
        let factory = factory("debug", &Target::File(path.clone())).unwrap();
        let mut exporter = factory.make();
        exporter.configure(&Context { exporter_id: "debug".into(), partition_id: 2 }).unwrap();
        let mut controller = Controller::new(0);
        exporter.export(&signal(2), &mut controller).unwrap();
        exporter.export(&signal(3), &mut controller).unwrap();
        assert_eq!(controller.last_acknowledged(), 0, "nothing written yet");
        exporter.flush(&mut controller).unwrap();
        assert_eq!(controller.last_acknowledged(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1]["partitionId"], 2);
        assert_eq!(lines[2]["position"], 3);
        assert_eq!(lines[2]["valueType"], "SIGNAL");
    }
}
