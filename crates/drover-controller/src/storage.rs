//! When `StateSaveLocation` fills up or fails: the controller stays up, keeps serving reads,
//! refuses new work in one line, logs once a minute, and resumes by itself once the journal
//! can write again. Nothing acknowledged is lost: a batch that cannot be written stays
//! buffered, and its replies and launches wait with it (see `Owner::run`).

use drover_journal::{Journal, JournalError};
use tonic::Status;

/// How often a continuing trouble is logged again.
const LOG_EVERY: i64 = 60;
/// How long after a failed snapshot the next is tried.
const SNAPSHOT_RETRY: i64 = 60;

#[derive(Default)]
pub struct Storage {
    /// When the trouble began (`None`: none).
    since: Option<i64>,
    last_log: i64,
    /// The last write error, while commits fail.
    error: Option<String>,
    /// No snapshot is tried before this time (after one failed).
    next_snapshot: i64,
}

impl Storage {
    /// The answer to a request that would add work while the journal cannot take it.
    pub fn refusal(&self, journal: &Journal) -> Option<Status> {
        if let Some(e) = self.error.as_ref().filter(|_| journal.failing()) {
            return Some(Status::failed_precondition(format!(
                "StateSaveLocation cannot be written ({e}): the controller takes no new work until it can"
            )));
        }
        journal.space_low().then(|| {
            Status::failed_precondition("StateSaveLocation is full: the controller takes no new work until it has room")
        })
    }

    /// Notes how a commit went; says whether its effects (replies, launches) may go.
    pub fn committed(&mut self, journal: &Journal, res: Result<(), JournalError>, now: i64) -> bool {
        let ok = match res {
            Ok(()) => {
                self.error = None;
                true
            }
            Err(e) => {
                let e = match &e {
                    JournalError::Io { source, .. } => source.to_string(),
                    e => e.to_string(),
                };
                self.error = Some(e);
                false
            }
        };
        let trouble = !ok || journal.space_low();
        match (self.since, trouble) {
            (None, true) => {
                self.since = Some(now);
                self.last_log = now;
                crate::log(&self.describe(journal, now));
            }
            (Some(_), true) if now - self.last_log >= LOG_EVERY => {
                self.last_log = now;
                crate::log(&self.describe(journal, now));
            }
            (Some(since), false) => {
                self.since = None;
                crate::log(&format!(
                    "StateSaveLocation can be written again after {}s: new work is accepted",
                    now - since
                ));
            }
            _ => {}
        }
        ok
    }

    fn describe(&self, journal: &Journal, now: i64) -> String {
        let since = self.since.filter(|&s| now > s).map(|s| format!(" (for {}s)", now - s)).unwrap_or_default();
        match &self.error {
            Some(e) => format!(
                "error: cannot write the journal: {e}{since}; changes wait in memory, unacknowledged, and new work \
                 is refused until a write succeeds"
            ),
            None if journal.space_low() => format!(
                "error: StateSaveLocation is full{since}: new work is refused; jobs already accepted go on, and the \
                 room kept ahead records them"
            ),
            None => "StateSaveLocation can be written".into(),
        }
    }

    /// Whether a snapshot may be tried now.
    pub fn may_snapshot(&self, now: i64) -> bool {
        now >= self.next_snapshot
    }

    /// A snapshot failed: say so, and wait a while before the next try.
    pub fn snapshot_failed(&mut self, e: &JournalError, now: i64) {
        self.next_snapshot = now + SNAPSHOT_RETRY;
        crate::log(&format!("error: snapshot failed (tried again in {SNAPSHOT_RETRY}s): {e}"));
    }
}
