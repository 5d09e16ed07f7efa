//! The lease on a shared `StateSaveLocation`, as files in `StateSaveLocation/ha/`:
//!
//! ```text
//!  term-00000000000000000007   made with O_EXCL by the controller that won term 7 (its name)
//!  beat                        "TERM NAME COUNT held|released", replaced (rename) on each renewal
//! ```
//!
//! A term is claimed by creating its file exclusively, which the file system lets exactly one
//! process do (on NFS too): two standbys that see the lease expire at once cannot both win.
//! The holder renews by replacing `beat`; a standby never reads a clock of the holder's, only
//! whether `beat` changed within the lease, by its own monotonic clock. Sync file I/O only.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What `beat` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    pub term: u64,
    pub holder: String,
    pub count: u64,
    /// The holder handed over: it writes nothing more, and a standby may claim at once.
    pub released: bool,
}

impl Beat {
    fn encode(&self) -> String {
        format!("{} {} {} {}\n", self.term, self.holder, self.count, if self.released { "released" } else { "held" })
    }

    pub fn decode(text: &str) -> Option<Beat> {
        let mut w = text.split_whitespace();
        let term = w.next()?.parse().ok()?;
        let holder = w.next()?.to_string();
        let count = w.next()?.parse().ok()?;
        let released = match w.next()? {
            "released" => true,
            "held" => false,
            _ => return None,
        };
        Some(Beat { term, holder, count, released })
    }
}

/// The lease files of one state directory.
#[derive(Debug, Clone)]
pub struct LeaseDir {
    dir: PathBuf,
}

impl LeaseDir {
    /// `StateSaveLocation/ha` (made private to the controller's user if missing).
    pub fn open(state_dir: &Path) -> io::Result<LeaseDir> {
        let dir = state_dir.join("ha");
        drover_journal::private::create_dir(&dir)?;
        Ok(LeaseDir { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn term_path(&self, term: u64) -> PathBuf {
        self.dir.join(format!("term-{term:020}"))
    }

    /// The highest claimed term and who claimed it (0 and "" where none was).
    pub fn latest_term(&self) -> io::Result<(u64, String)> {
        let mut best = 0;
        for e in fs::read_dir(&self.dir)? {
            let name = e?.file_name();
            if let Some(t) = name.to_str().and_then(|n| n.strip_prefix("term-")).and_then(|t| t.parse::<u64>().ok()) {
                best = best.max(t);
            }
        }
        if best == 0 {
            return Ok((0, String::new()));
        }
        // A claim cut short between create and write names nobody; it still counts.
        let holder = fs::read_to_string(self.term_path(best)).unwrap_or_default().trim().to_string();
        Ok((best, holder))
    }

    /// Claims `term` for `name`: true if this call made its file, false if another did.
    pub fn claim(&self, term: u64, name: &str) -> io::Result<bool> {
        let path = self.term_path(term);
        let mut f = match drover_journal::private::file_options().write(true).create_new(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        };
        f.write_all(format!("{name}\n").as_bytes())?;
        f.sync_all()?;
        fs::File::open(&self.dir)?.sync_all()?;
        // Older claims say nothing any more: keep the last few for whoever reads the history.
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let n = e.file_name();
                if let Some(t) = n.to_str().and_then(|n| n.strip_prefix("term-")).and_then(|t| t.parse::<u64>().ok()) {
                    if t + 8 < term {
                        let _ = fs::remove_file(e.path());
                    }
                }
            }
        }
        Ok(true)
    }

    /// The raw content of `beat` (what a standby compares), empty where there is none.
    pub fn read_beat_raw(&self) -> String {
        fs::read_to_string(self.dir.join("beat")).unwrap_or_default()
    }

    pub fn read_beat(&self) -> Option<Beat> {
        Beat::decode(&self.read_beat_raw())
    }

    /// Replaces `beat` (written beside it, then renamed over it: a reader sees one or the other).
    pub fn write_beat(&self, b: &Beat) -> io::Result<()> {
        let tmp = self.dir.join(format!("beat.{}.tmp", b.holder));
        let mut f = drover_journal::private::file_options().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(b.encode().as_bytes())?;
        drop(f);
        fs::rename(&tmp, self.dir.join("beat"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_is_won_once() {
        let d = tempfile::tempdir().unwrap();
        let l = LeaseDir::open(d.path()).unwrap();
        assert_eq!(l.latest_term().unwrap(), (0, String::new()));
        assert!(l.claim(1, "ctl1").unwrap());
        assert!(!l.claim(1, "ctl2").unwrap(), "a second claim of the same term must lose");
        assert!(l.claim(2, "ctl2").unwrap());
        assert_eq!(l.latest_term().unwrap(), (2, "ctl2".into()));
    }

    #[test]
    fn racing_claims_have_one_winner() {
        let d = tempfile::tempdir().unwrap();
        let l = LeaseDir::open(d.path()).unwrap();
        let wins: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    s.spawn({
                        let l = l.clone();
                        move || l.claim(5, &format!("c{i}")).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| usize::from(h.join().unwrap())).sum()
        });
        assert_eq!(wins, 1);
    }

    #[test]
    fn old_terms_are_pruned() {
        let d = tempfile::tempdir().unwrap();
        let l = LeaseDir::open(d.path()).unwrap();
        for t in 1..=20 {
            assert!(l.claim(t, "c").unwrap());
        }
        let n = fs::read_dir(l.path()).unwrap().count();
        assert!(n <= 9, "{n} term files kept");
        assert_eq!(l.latest_term().unwrap().0, 20);
    }

    #[test]
    fn beat_round_trips_and_garbage_is_none() {
        let d = tempfile::tempdir().unwrap();
        let l = LeaseDir::open(d.path()).unwrap();
        assert_eq!(l.read_beat(), None);
        let b = Beat { term: 3, holder: "ctl2".into(), count: 17, released: true };
        l.write_beat(&b).unwrap();
        assert_eq!(l.read_beat(), Some(b));
        fs::write(l.path().join("beat"), "3 ctl2 x held").unwrap();
        assert_eq!(l.read_beat(), None);
    }
}
