//! scrontab: each user's crontab, kept as slurmctld keeps it (`crontab/crontab.<uid>` in
//! `StateSaveLocation`, the controller's alone), and a job for each of its entries. An entry's
//! job waits for its next time (`BeginTime`); whatever its end, it goes back to the queue for
//! the time after (each run is its own record in accounting), until its crontab changes or
//! `scancel --cron` cancels it, which disables its entry (`#DISABLED: `).

use super::*;
use drover_model::cron::{Minute, Schedule};

/// Slurm's answers.
const DISABLED: &str = "scrontab is disabled on this cluster";
pub(super) const CANCEL_NEEDS_CRON: &str = "Cannot cancel scrontab jobs without --cron flag.";
pub(super) const NO_SCONTROL: &str = "Cannot modify scrontab jobs through scontrol";

/// The first minute after `t` (epoch seconds) that `schedule` matches, in the controller's
/// local time, as epoch seconds.
pub(crate) fn next_time(schedule: &Schedule, t: i64) -> Option<i64> {
    let tz = jiff::tz::TimeZone::system();
    let now = jiff::Timestamp::from_second(t).ok()?.to_zoned(tz.clone()).datetime();
    let after = Minute {
        year: i32::from(now.year()),
        month: now.month() as u32,
        day: now.day() as u32,
        hour: now.hour() as u32,
        minute: now.minute() as u32,
    };
    let m = schedule.next_after(after)?;
    let civil = jiff::civil::date(m.year as i16, m.month as i8, m.day as i8).at(m.hour as i8, m.minute as i8, 0, 0);
    Some(civil.to_zoned(tz).ok()?.timestamp().as_second())
}

impl Owner {
    fn crontab_dir(&self) -> std::path::PathBuf {
        std::path::Path::new(&self.cfg.state_save_location).join("crontab")
    }

    fn crontab_path(&self, uid: u32) -> std::path::PathBuf {
        self.crontab_dir().join(format!("crontab.{uid}"))
    }

    fn crontab_allowed(&self, uid: u32, caller: Caller) -> Result<(), Status> {
        if !self.cfg.scron_enabled {
            return Err(Status::failed_precondition(DISABLED));
        }
        if caller.uid != uid && !self.operator(caller) {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        Ok(())
    }

    fn read_crontab(&self, uid: u32) -> Result<Option<String>, Status> {
        let path = self.crontab_path(uid);
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Status::internal(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Replaces `uid`'s crontab with `text` (or removes it), durably: written whole, synced,
    /// renamed, and the folder synced, before the caller is answered; mode 0600.
    fn write_crontab(&self, uid: u32, text: Option<&str>) -> Result<(), Status> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = self.crontab_dir();
        let fail = |what: &std::path::Path, e: std::io::Error| Status::internal(format!("{}: {e}", what.display()));
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| fail(&dir, e))?;
        let path = self.crontab_path(uid);
        match text {
            Some(t) => {
                let tmp = dir.join(format!(".crontab.{uid}.new"));
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)
                    .map_err(|e| fail(&tmp, e))?;
                f.write_all(t.as_bytes()).and_then(|_| f.sync_all()).map_err(|e| fail(&tmp, e))?;
                std::fs::rename(&tmp, &path).map_err(|e| fail(&path, e))?;
            }
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(fail(&path, e)),
                _ => {}
            },
        }
        std::fs::File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| fail(&dir, e))
    }

    pub(super) fn get_crontab(&self, uid: u32, caller: Caller) -> Result<v1::CrontabReply, Status> {
        self.crontab_allowed(uid, caller)?;
        Ok(match self.read_crontab(uid)? {
            Some(text) => v1::CrontabReply { found: true, text },
            None => v1::CrontabReply::default(),
        })
    }

    /// The jobs of `uid`'s crontab entries that have not ended for good.
    fn cron_jobs_of(&self, uid: u32) -> Vec<JobId> {
        self.durable
            .jobs
            .values()
            .filter(|j| j.uid == uid && !j.status.state.is_finished())
            .filter(|j| j.spec.cron().is_some())
            .map(|j| j.id)
            .collect()
    }

    /// A new crontab for `req.uid` with a job for each entry (or none: `remove`). Entries
    /// whose schedule or job is refused are named by their lines, and nothing changes.
    pub(super) fn update_crontab(
        &mut self,
        req: v1::CrontabUpdate,
        caller: Caller,
    ) -> Result<v1::CrontabUpdateReply, Status> {
        self.crontab_allowed(req.uid, caller)?;
        let t = now();
        let refuse =
            |lines: String, error: String| v1::CrontabUpdateReply { failed_lines: lines, error, job_ids: vec![] };
        // Every entry's request and next time first: a bad one refuses the crontab before any
        // job is made.
        let mut specs = Vec::new();
        for w in if req.remove { Vec::new() } else { req.jobs } {
            let mut spec = drover_proto::spec_from_wire(w).map_err(Status::invalid_argument)?;
            let lines = format!("{}-{}", spec.cron_lines.0, spec.cron_lines.1);
            let next = match spec.cron.as_deref().map(Schedule::parse) {
                Some(Ok(s)) => next_time(&s, t),
                Some(Err(e)) => return Ok(refuse(lines, e)),
                None => return Ok(refuse(lines, "an entry without a schedule".into())),
            };
            let Some(next) = next else {
                return Ok(refuse(lines, "the schedule never matches".into()));
            };
            spec.begin_time = Some(next);
            spec.uid = req.uid;
            specs.push((lines, spec));
        }
        let old = self.cron_jobs_of(req.uid);
        let mut made = Vec::new();
        let mut refused = None;
        for (lines, spec) in specs {
            match self.submit(spec, caller, false) {
                Ok(r) => made.push(r.job_id),
                Err(e) => {
                    refused = Some((lines, e.message().to_string()));
                    break;
                }
            }
        }
        if let Some((failed_lines, error)) = refused {
            // Nothing changes: the jobs made for this crontab are cancelled.
            for id in made {
                self.end_pending(id, Some(caller.uid), PendingReason::None, t);
            }
            return Ok(v1::CrontabUpdateReply { failed_lines, error, ..Default::default() });
        }
        self.write_crontab(req.uid, (!req.remove).then_some(req.text.as_str()))?;
        for id in old {
            self.retire_cron_job(id, caller, t);
        }
        Ok(v1::CrontabUpdateReply { job_ids: made, ..Default::default() })
    }

    /// An entry's job whose crontab changed: waiting, it is cancelled; running, it runs to
    /// its end and does not come back.
    fn retire_cron_job(&mut self, id: JobId, caller: Caller, t: i64) {
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return };
        if j.status.state == JobState::Pending {
            self.end_pending(id, Some(caller.uid), PendingReason::None, t);
        } else {
            let mut spec = j.spec.unpack();
            spec.cron = None;
            self.record(Record::Update { id, spec, status: j.status.clone() });
        }
    }

    /// `scancel --cron` of an entry's job: its lines in the crontab are disabled
    /// (`#DISABLED: `, as Slurm shows them), so that it does not come back.
    pub(super) fn disable_cron_entry(&mut self, id: JobId) {
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return };
        let spec = j.spec.unpack();
        let (first, last) = spec.cron_lines;
        let Ok(Some(text)) = self.read_crontab(j.uid) else { return };
        let mut out = String::new();
        for (i, line) in text.lines().enumerate() {
            let i = i as u32 + 1;
            if i >= first && i <= last && !line.starts_with("#DISABLED: ") {
                out.push_str("#DISABLED: ");
            }
            out.push_str(line);
            out.push('\n');
        }
        if let Err(e) = self.write_crontab(j.uid, Some(&out)) {
            crate::log(&format!("error: disabling the crontab entry of job {id}: {}", e.message()));
        }
    }

    /// A scrontab job that ended (not cancelled) goes back to the queue for its entry's next
    /// time: its run is recorded as it ended (`st.state_desc` names the state for
    /// accounting), and `true` says the caller requeues it.
    pub(super) fn cron_again(&mut self, id: JobId, st: &mut JobStatus, state: JobState, end: i64) -> bool {
        // Without scrontab (the default) no job has a schedule: nothing is read at a job's end.
        if !self.cfg.scron_enabled || st.cancelled_by.is_some() || state == JobState::Cancelled {
            return false;
        }
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return false };
        let Some(next) = j.spec.cron().and_then(|c| Schedule::parse(&c).ok()).and_then(|s| next_time(&s, end)) else {
            return false;
        };
        let mut spec = j.spec.unpack();
        spec.begin_time = Some(next);
        st.state_desc = state.name().to_string();
        st.end_time = end;
        self.record(Record::Update { id, spec, status: st.clone() });
        true
    }
}
