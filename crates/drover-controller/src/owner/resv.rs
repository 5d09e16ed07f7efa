//! Advance reservations in the controller: `scontrol create|update|delete reservation`,
//! windows that open, close and repeat, and what that does to the nodes and jobs in them.
//! The scheduler core keeps outsiders off a reservation's nodes over its window and its
//! members on them (see `drover_sched::AdvanceResv`).

use super::{now, Owner};
use crate::intern::intern;
use crate::state::{HoldKind, Job, Record};
use drover_model::hostlist::Hostlist;
use drover_model::resv::{apply_list, parse_flags, Reservation, ResvFlag, UNLIMITED_SECS};
use drover_model::state::JobState;
use drover_proto::v1;
use drover_proto::Caller;
use drover_sched::{AdvanceResv, Event};
use std::sync::Arc;
use tonic::Status;

/// A request's fields, by canonical key (the command resolved abbreviations and times).
struct Fields<'a>(&'a [v1::ResvField]);

impl Fields<'_> {
    fn get(&self, key: &str) -> Option<&v1::ResvField> {
        self.0.iter().rev().find(|f| f.key.eq_ignore_ascii_case(key))
    }
    fn value(&self, key: &str) -> Option<&str> {
        self.get(key).map(|f| f.value.as_str())
    }
    fn op(&self, key: &str) -> Option<char> {
        self.get(key).and_then(|f| f.op.chars().next())
    }
}

fn invalid(msg: &str) -> Status {
    Status::invalid_argument(msg.to_string())
}

/// Reservations may start this long in the past (a `now` that took a moment to arrive), as
/// Slurm's `MAX_RESV_DELAY`.
const MAX_RESV_DELAY: i64 = 600;

impl Owner {
    pub(super) fn reservation(&mut self, req: v1::ResvRequest, caller: Caller) -> Result<v1::ResvReply, Status> {
        if !self.operator(caller) {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        let f = Fields(&req.fields);
        let t = now();
        match req.action.as_str() {
            "create" => self.resv_create(&f, t),
            "update" => self.resv_update(&f, t).map(|_| v1::ResvReply::default()),
            "delete" => {
                let name = f.value("ReservationName").unwrap_or_default().to_string();
                self.resv_delete(&name)?;
                Ok(v1::ResvReply::default())
            }
            other => Err(invalid(&format!("unknown reservation action {other}"))),
        }
    }

    fn resv_create(&mut self, f: &Fields, t: i64) -> Result<v1::ResvReply, Status> {
        let users = apply_list(&[], None, f.value("Users").unwrap_or_default());
        let accounts = apply_list(&[], None, f.value("Accounts").unwrap_or_default());
        if users.is_empty() && accounts.is_empty() {
            return Err(invalid("Reservation request lacks users, groups or accounts"));
        }
        let mut seq = 0;
        let name = match f.value("ReservationName").filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => {
                // Slurm's name: the first user (or account) and a number counted up.
                seq = self.durable.resv_seq + 1;
                let who = users.first().or(accounts.first()).map(|w| w.trim_start_matches('-')).unwrap_or("resv");
                format!("{who}_{seq}")
            }
        };
        if self.durable.resvs.contains_key(&name) {
            return Err(invalid("Duplicate reservation name"));
        }
        let mut flags = Vec::new();
        if let Some(v) = f.value("Flags") {
            let ch = parse_flags(v).map_err(|e| invalid(&e))?;
            flags = ch.add;
        }
        let mut r = Reservation {
            name,
            start: 0,
            end: 0,
            nodes: Vec::new(),
            partition: f.value("PartitionName").map(String::from),
            users,
            accounts,
            flags,
            cores: 0,
        };
        self.resv_window(&mut r, f, t)?;
        self.resv_nodes(&mut r, f, t)?;
        self.resv_check(&r, t)?;
        let name = r.name.clone();
        self.record(Record::ResvSet { resv: r, seq });
        self.resvs_changed();
        Ok(v1::ResvReply { name })
    }

    fn resv_update(&mut self, f: &Fields, t: i64) -> Result<(), Status> {
        let name = f.value("ReservationName").unwrap_or_default();
        let Some(mut r) = self.durable.resvs.get(name).cloned() else {
            return Err(invalid("Requested reservation is invalid"));
        };
        if let Some(v) = f.value("Users") {
            r.users = apply_list(&r.users, f.op("Users"), v);
        }
        if let Some(v) = f.value("Accounts") {
            r.accounts = apply_list(&r.accounts, f.op("Accounts"), v);
        }
        if r.users.is_empty() && r.accounts.is_empty() {
            return Err(invalid("Reservation request lacks users, groups or accounts"));
        }
        if let Some(v) = f.value("Flags") {
            let ch = parse_flags(v).map_err(|e| invalid(&e))?;
            // `Flags=X` and `Flags+=X` add; `Flags-=X` (or `-X`) removes.
            let (add, remove) = if f.op("Flags") == Some('-') { (Vec::new(), ch.add) } else { (ch.add, ch.remove) };
            r.flags.retain(|x| !remove.contains(x));
            for x in add {
                if !r.flags.contains(&x) {
                    r.flags.push(x);
                }
            }
        }
        if let Some(p) = f.value("PartitionName") {
            r.partition = Some(p.to_string());
        }
        self.resv_window(&mut r, f, t)?;
        if f.value("Nodes").is_some() || f.value("NodeCnt").is_some() {
            r.nodes.clear();
            r.flags.retain(|x| *x != ResvFlag::SpecNodes);
            self.resv_nodes(&mut r, f, t)?;
        }
        self.resv_check(&r, t)?;
        self.record(Record::ResvSet { resv: r, seq: 0 });
        self.resvs_changed();
        Ok(())
    }

    /// Start and end from `StartTime=`, `EndTime=` and `Duration=` (minutes, `+=`/`-=` to
    /// lengthen or shorten; -1 for UNLIMITED), keeping what is not given.
    fn resv_window(&self, r: &mut Reservation, f: &Fields, t: i64) -> Result<(), Status> {
        let bad_time = || invalid("Invalid time specified");
        let len = r.end - r.start;
        if let Some(v) = f.value("StartTime") {
            let s: i64 = v.parse().map_err(|_| bad_time())?;
            if s < t - MAX_RESV_DELAY {
                return Err(bad_time());
            }
            // A start just past (`now`, a moment ago) is now.
            r.start = s.max(t);
            r.end = r.start + len;
        }
        if let Some(v) = f.value("EndTime") {
            r.end = v.parse().map_err(|_| bad_time())?;
        }
        if let Some(v) = f.value("Duration") {
            let m: i64 = v.parse().map_err(|_| bad_time())?;
            let secs = if m < 0 { UNLIMITED_SECS } else { m * 60 };
            r.end = match f.op("Duration") {
                Some('+') => r.end + secs,
                Some('-') => r.end - secs,
                _ => r.start + secs,
            };
        }
        if r.end <= r.start {
            return Err(bad_time());
        }
        Ok(())
    }

    /// Nodes from `Nodes=` (a hostlist, or ALL) or `NodeCnt=` (that many free nodes of the
    /// partition, chosen as jobs are: by weight, then configuration order).
    fn resv_nodes(&self, r: &mut Reservation, f: &Fields, t: i64) -> Result<(), Status> {
        let part = match &r.partition {
            Some(p) => Some(self.cfg.partition(p).ok_or_else(|| invalid("Invalid partition name specified"))?),
            None => None,
        };
        if let Some(v) = f.value("Nodes") {
            if v.eq_ignore_ascii_case("ALL") {
                r.nodes = match part {
                    Some(p) => p.nodes.clone(),
                    None => self.cfg.nodes.iter().map(|n| n.name.clone()).collect(),
                };
            } else {
                let names = Hostlist::parse(v).map_err(|_| invalid("Invalid node name specified"))?.names();
                if names.iter().any(|n| self.cfg.node(n).is_none()) {
                    return Err(invalid("Invalid node name specified"));
                }
                r.nodes = names;
                r.flags.push(ResvFlag::SpecNodes);
            }
        } else if let Some(v) = f.value("NodeCnt") {
            let n: usize = v.parse().map_err(|_| invalid("Invalid node count specification"))?;
            let part = match part {
                Some(p) => p,
                None => self.cfg.default_partition().ok_or_else(|| invalid("Invalid partition name specified"))?,
            };
            r.partition = Some(part.name.clone());
            let mut candidates: Vec<&drover_model::conf::NodeConf> =
                part.nodes.iter().filter_map(|n| self.cfg.node(n)).collect();
            candidates.sort_by_key(|c| c.weight);
            let picked: Vec<String> = candidates
                .into_iter()
                .filter(|c| self.node_state(&c.name).schedulable())
                .filter(|c| self.resv_conflict(r, std::slice::from_ref(&c.name), t).is_none())
                .take(n)
                .map(|c| c.name.clone())
                .collect();
            if picked.len() < n || n == 0 {
                return Err(invalid("Requested node configuration is not available"));
            }
            r.nodes = picked;
        } else if r.nodes.is_empty() {
            return Err(invalid("Requested node configuration is not available"));
        }
        r.flags.sort();
        r.flags.dedup();
        r.cores = r.nodes.iter().filter_map(|n| self.cfg.node(n)).map(|n| n.cpus).sum();
        Ok(())
    }

    /// Why these nodes cannot be in `r`: another reservation holds them over its window
    /// (neither may overlap), or jobs will still run there when it starts.
    fn resv_conflict(&self, r: &Reservation, nodes: &[String], t: i64) -> Option<&'static str> {
        let shares = |o: &Reservation| {
            o.name != r.name && o.start < r.end && r.start < o.end && o.nodes.iter().any(|n| nodes.contains(n))
        };
        let overlap_ok = |o: &Reservation| {
            r.has(ResvFlag::Maint) || r.has(ResvFlag::Overlap) || o.has(ResvFlag::Maint) || o.has(ResvFlag::Overlap)
        };
        if self.durable.resvs.values().any(|o| shares(o) && !overlap_ok(o)) {
            return Some("Requested reservation overlaps with another reservation");
        }
        if !r.has(ResvFlag::IgnoreJobs) && !r.has(ResvFlag::Maint) {
            let busy = self.durable.jobs.values().any(|j| {
                matches!(j.status.state, JobState::Running | JobState::Suspended | JobState::Completing)
                    && j.spec.unpack().reservation.as_deref() != Some(r.name.as_str())
                    && j.status.alloc.as_ref().is_some_and(|a| a.nodes.iter().any(|n| nodes.contains(&n.node)))
                    && j.status.time_limit.is_none_or(|l| j.status.start_time + l as i64 > r.start.max(t))
            });
            if busy {
                return Some("Requested nodes are busy");
            }
        }
        None
    }

    fn resv_check(&self, r: &Reservation, t: i64) -> Result<(), Status> {
        for u in &r.users {
            let name = u.trim_start_matches('-');
            if nix::unistd::User::from_name(name).ok().flatten().is_none() {
                return Err(invalid("Invalid user id"));
            }
        }
        if let Some(st) = self.acct_admin.as_deref() {
            if r.accounts.iter().any(|a| !st.assocs.iter().any(|x| x.account == *a)) {
                return Err(invalid("Invalid account or account/partition combination specified"));
            }
        }
        match self.resv_conflict(r, &r.nodes, t) {
            Some(e) => Err(invalid(e)),
            None => Ok(()),
        }
    }

    fn resv_delete(&mut self, name: &str) -> Result<(), Status> {
        if !self.durable.resvs.contains_key(name) {
            return Err(invalid("Requested reservation is invalid"));
        }
        // As Slurm 22.05: not while any job, waiting or running, is in it.
        let used = self
            .durable
            .jobs
            .values()
            .any(|j| !j.status.state.is_finished() && j.spec.unpack().reservation.as_deref() == Some(name));
        if used {
            return Err(invalid("Requested reservation is in use"));
        }
        self.resv_gone(name);
        self.resvs_changed();
        Ok(())
    }

    /// A reservation that ended or was deleted: its waiting jobs are held
    /// (`ReservationDeleted`, releasable by their users) unless it said
    /// `NO_HOLD_JOBS_AFTER_END`, in which case they wait for anything else.
    fn resv_gone(&mut self, name: &str) {
        let hold = !self.durable.resvs.get(name).is_some_and(|r| r.has(ResvFlag::NoHoldJobsAfterEnd));
        let members: Vec<_> = self
            .durable
            .jobs
            .values()
            .filter(|j| j.status.state == JobState::Pending && j.spec.unpack().reservation.as_deref() == Some(name))
            .cloned()
            .collect();
        self.record(Record::ResvDelete { name: name.to_string() });
        for j in members {
            let mut spec = j.spec.unpack();
            let mut status = j.status.clone();
            spec.reservation = None;
            if hold && status.hold.is_none() {
                status.hold = Some(HoldKind::ResvDeleted);
            }
            self.record(Record::Update { id: j.id, spec, status });
            self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&j.id])));
        }
    }

    /// Tells the scheduler and the node states what the reservations are now.
    pub(super) fn resvs_changed(&mut self) {
        let list = self
            .durable
            .resvs
            .values()
            .map(|r| AdvanceResv {
                name: intern(&r.name),
                start: r.start,
                end: r.end,
                nodes: r.nodes.clone(),
                maint: r.has(ResvFlag::Maint),
            })
            .collect();
        self.core.handle(Event::ReservationsDefined(list));
        self.resv_active = self.active_resvs(now());
        self.resv_view = Arc::new(self.resv_infos());
        let names: Vec<String> = self.cfg.nodes.iter().map(|n| n.name.clone()).collect();
        for n in names {
            self.refresh_node(&n);
        }
        self.dirty = true;
    }

    fn active_resvs(&self, t: i64) -> Vec<String> {
        self.durable.resvs.values().filter(|r| r.active(t)).map(|r| r.name.clone()).collect()
    }

    /// Once a second: windows that closed move on (repeating ones) or end; windows that
    /// opened or closed change their nodes' states.
    pub(super) fn resv_tick(&mut self, t: i64) {
        if self.durable.resvs.values().next().is_none() && self.resv_active.is_empty() {
            return;
        }
        let ended: Vec<Reservation> = self.durable.resvs.values().filter(|r| r.end <= t).cloned().collect();
        for r in &ended {
            let weekday = |s: i64| {
                jiff::Timestamp::from_second(s)
                    .map(|ts| ts.to_zoned(jiff::tz::TimeZone::system()).weekday().to_sunday_zero_offset() as u32)
                    .unwrap_or(0)
            };
            let mut next = r.next_window(weekday);
            let mut moved = r.clone();
            while let Some((s, e)) = next {
                moved.start = s;
                moved.end = e;
                if e > t {
                    break;
                }
                next = moved.next_window(weekday);
            }
            if next.is_some() {
                self.record(Record::ResvSet { resv: moved, seq: 0 });
            } else {
                self.resv_gone(&r.name);
            }
        }
        if !ended.is_empty() || self.active_resvs(t) != self.resv_active {
            self.resvs_changed();
        }
    }

    /// A member of a reservation runs until the reservation's end at most (Slurm ends it
    /// then; `ResvOverRun=0`): the limit it starts with is cut to that.
    pub(super) fn resv_cap(&self, job: &Job, limit: Option<u64>, t: i64) -> Option<u64> {
        if self.durable.resvs.values().next().is_none() {
            // No reservation: no need to unpack the request of every job that starts.
            return limit;
        }
        let name = job.spec.unpack().reservation;
        let Some(r) = name.and_then(|n| self.durable.resvs.get(&n)) else { return limit };
        let left = (r.end - t).max(1) as u64;
        Some(limit.map_or(left, |l| l.min(left)))
    }

    /// Whether a node is in an active reservation, and in a maintenance one.
    pub(super) fn resv_node_flags(&self, node: &str, t: i64) -> (bool, bool) {
        let mut out = (false, false);
        for r in self.durable.resvs.values().filter(|r| r.active(t) && r.nodes.iter().any(|n| n == node)) {
            out.0 = true;
            out.1 |= r.has(ResvFlag::Maint);
        }
        out
    }

    /// A submitted job's `--reservation`: it must exist, and admit the job's user or account.
    pub(super) fn resv_admits(&self, name: &str, user: &str, account: Option<&str>) -> Result<(), Status> {
        let Some(r) = self.durable.resvs.get(name) else {
            return Err(invalid("Requested reservation is invalid"));
        };
        if !r.admits(user, account) {
            return Err(invalid("Access denied to requested reservation"));
        }
        Ok(())
    }

    /// The reservations as `scontrol show reservation` shows them, by name.
    fn resv_infos(&self) -> Vec<v1::ResvInfo> {
        self.durable
            .resvs
            .values()
            .map(|r| v1::ResvInfo {
                name: r.name.clone(),
                start_time: r.start,
                end_time: r.end,
                nodes: Hostlist::from_iter(&r.nodes).ranged(),
                node_cnt: r.nodes.len() as u32,
                core_cnt: r.cores,
                partition: r.partition.clone().unwrap_or_default(),
                flags: r.flags_text(),
                users: r.users.clone(),
                accounts: r.accounts.clone(),
            })
            .collect()
    }
}
