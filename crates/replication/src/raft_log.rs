//! The `raft` crate's own log (slog) carried into `tracing`, under the target `raft`: its
//! elections, role changes and refused votes explain a leadership move that the broker's own
//! lines ("leading", "no longer the leader") only report. Raft's info lines stay info (they
//! are rare: one per election step); its debug and trace lines cost a level check each.

use std::fmt::{self, Write as _};

/// A slog drain that writes each record as one `tracing` event, its key-value pairs (the
/// group's own and the record's) after the message.
pub(crate) struct TracingDrain;

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record<'_>, values: &slog::OwnedKVList) -> Result<(), slog::Never> {
        macro_rules! emit {
            ($level:expr) => {
                if tracing::enabled!(target: "raft", $level) {
                    let text = render(record, values);
                    tracing::event!(target: "raft", $level, "{text}");
                }
            };
        }
        match record.level() {
            slog::Level::Critical | slog::Level::Error => emit!(tracing::Level::ERROR),
            slog::Level::Warning => emit!(tracing::Level::WARN),
            slog::Level::Info => emit!(tracing::Level::INFO),
            slog::Level::Debug => emit!(tracing::Level::DEBUG),
            slog::Level::Trace => emit!(tracing::Level::TRACE),
        }
        Ok(())
    }
}

/// `message key=value ...`: the record's pairs, then the logger's.
fn render(record: &slog::Record<'_>, values: &slog::OwnedKVList) -> String {
    use slog::KV as _;
    let mut pairs = Pairs(String::new());
    let _ = record.kv().serialize(record, &mut pairs);
    let _ = values.serialize(record, &mut pairs);
    format!("{}{}", record.msg(), pairs.0)
}

struct Pairs(String);

impl slog::Serializer for Pairs {
    fn emit_arguments(&mut self, key: slog::Key, val: &fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_renders_as_its_message_then_its_pairs_then_the_loggers() {
        let logger = slog::Logger::root(Capture, slog::o!("group" => 7));
        slog::info!(logger, "became leader at term {term}", term = 3; "raft_id" => 2);
        let lines = logger_lines();
        assert_eq!(lines, vec!["became leader at term 3 raft_id=2 term=3 group=7".to_string()]);
    }

    thread_local! {
        static LINES: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    fn logger_lines() -> Vec<String> {
        LINES.with(|l| l.borrow().clone())
    }

    /// Renders as [`TracingDrain`] does, into a thread-local list.
    struct Capture;

    impl slog::Drain for Capture {
        type Ok = ();
        type Err = slog::Never;
        fn log(&self, record: &slog::Record<'_>, values: &slog::OwnedKVList) -> Result<(), slog::Never> {
            LINES.with(|l| l.borrow_mut().push(render(record, values)));
            Ok(())
        }
    }
}
