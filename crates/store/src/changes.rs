//! Change notification (issue 28's live UI): the exporter tells, after each transaction that
//! changed rows is committed, that the store has something new to show; the REST API's pages
//! subscribe instead of polling.
//!
//! A [`Changes`] is a `tokio::sync::watch` channel of a counter of such commits: a subscriber
//! holds only the latest value, never a queue, so a slow or absent reader costs nothing but
//! its receiver, however many commits come.

use tokio::sync::watch;

/// The commits of one store's exporters (cheap to clone: all clones share one channel).
#[derive(Debug, Clone)]
pub struct Changes {
    tx: std::sync::Arc<watch::Sender<u64>>,
}

impl Default for Changes {
    fn default() -> Self {
        let (tx, _) = watch::channel(0);
        Self { tx: std::sync::Arc::new(tx) }
    }
}

impl Changes {
    /// Counts one committed transaction that changed rows; wakes every subscriber (no-op
    /// without any).
    pub fn committed(&self) {
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver of the counter; `changed()` resolves after the next commit.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }

    /// The number of committed transactions that changed rows so far.
    pub fn count(&self) -> u64 {
        *self.tx.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_see_the_latest_count_not_a_queue() {
        let changes = Changes::default();
        let mut rx = changes.subscribe();
        assert!(!rx.has_changed().unwrap());
        for _ in 0..1000 {
            changes.committed();
        }
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 1000);
        assert!(!rx.has_changed().unwrap());
        assert_eq!(changes.count(), 1000);
    }
}
