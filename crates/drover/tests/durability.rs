//! The controller's state refuses to guess: damage to its journal or snapshot stops it with
//! a message that names the file (losing nothing by itself), `--check-state` reports without
//! changing anything, `--salvage` recovers what is intact on request; a full
//! StateSaveLocation refuses new work while reads go on, and work resumes by itself.

use drover_testkit::{root_or_skip, Cluster, Options};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn journal_dir(c: &Cluster) -> PathBuf {
    c.path().join("state/journal")
}

fn newest_segment(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let g = e.file_name().to_str()?.strip_prefix("journal.")?.parse::<u64>().ok()?;
            Some((g, e.path()))
        })
        .max()
        .expect("a journal segment")
        .1
}

/// Every file below `dir` with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push((e.path(), std::fs::read(e.path()).unwrap()));
        }
    }
    out.sort();
    out
}

fn pending_ids(c: &Cluster) -> Vec<u32> {
    let out = c.ok("squeue", &["-h", "-o", "%i"]);
    let mut ids: Vec<u32> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    ids.sort();
    ids
}

fn check_state(c: &Cluster, salvage: bool) -> (i32, String) {
    let state = c.path().join("state");
    let mut cmd = Command::new(EXE);
    cmd.args(["controller", "--check-state", state.to_str().unwrap()]);
    if salvage {
        cmd.arg("--salvage");
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string())
}

/// Starts the controller on damaged state and expects it to refuse, naming `needle`.
fn expect_refusal(c: &mut Cluster, needle: &str) {
    c.start_controller();
    let st = c.controller_exit(Duration::from_secs(20)).expect("the controller refuses to start");
    assert!(!st.success());
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    let last = log.lines().last().unwrap_or("");
    assert!(last.contains("refusing to start") && last.contains(needle), "{last}");
    assert!(last.contains("--check-state"), "it says what to do: {last}");
}

fn wait_controller(c: &Cluster) {
    c.wait_until("the controller to answer", Duration::from_secs(30), || c.run("squeue", &["-h"]).status.success());
}

/// Four bytes flipped in the middle of the newest journal: the controller had "dropped a
/// torn tail" of every batch from there on, acknowledged jobs with it. Now it refuses and
/// changes nothing; the check says where; the salvage keeps every intact batch, the ones
/// after the damage included, and writes down what was lost.
#[test]
fn a_flipped_journal_is_refused_then_checked_then_salvaged() {
    let mut c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let ids: Vec<u32> = (0..40).map(|i| c.submit(&["--hold", "--wrap", &format!("echo {i}")])).collect();
    assert_eq!(pending_ids(&c), ids);
    c.kill_controller();
    let seg = newest_segment(&journal_dir(&c));
    let mut data = std::fs::read(&seg).unwrap();
    let mid = data.len() / 2;
    for b in &mut data[mid..mid + 4] {
        *b ^= 0xff;
    }
    std::fs::write(&seg, &data).unwrap();
    let before = files(&journal_dir(&c));

    expect_refusal(&mut c, &format!("{} at offset", seg.display()));
    assert_eq!(files(&journal_dir(&c)), before, "a refusing controller changes nothing");

    let (code, report) = check_state(&c, false);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("DAMAGE: ") && report.contains("this is damage, not a torn tail"), "{report}");
    // Without a directory: slurm.conf's StateSaveLocation.
    let out = Command::new(EXE)
        .args(["controller", "--check-state", "-f", c.path().join("slurm.conf").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).to_string()), (Some(1), report.clone()));
    assert!(report.contains("result: DAMAGED"), "{report}");
    assert_eq!(files(&journal_dir(&c)), before, "a check changes nothing");

    let (code, report) = check_state(&c, true);
    assert_eq!(code, 0, "{report}");
    let saved = report.lines().find_map(|l| l.strip_prefix("result: salvaged; this report is in ")).unwrap();
    assert!(std::fs::read_to_string(saved).unwrap().contains("bytes of journal could not be read"), "{saved}");
    let absent = report.lines().find_map(|l| l.strip_prefix("job ids given out but not in the state: ")).unwrap();

    c.start_controller();
    wait_controller(&c);
    let now = pending_ids(&c);
    let lost: Vec<u32> = ids.iter().copied().filter(|i| !now.contains(i)).collect();
    assert!(!lost.is_empty() && lost.len() <= 2, "one batch lost, not the rest: {lost:?}");
    assert!(now.contains(&ids[39]), "the batches after the damage are kept");
    let lost_text: Vec<String> = lost.iter().map(|i| i.to_string()).collect();
    assert!(absent.starts_with(&lost_text.join(",")), "the report names the lost ids: {absent} vs {lost:?}");
    // And the salvaged controller goes on: new work, and a clean check.
    c.submit(&["--hold", "--wrap", "true"]);
    c.kill_controller();
    let (code, report) = check_state(&c, false);
    assert_eq!(code, 0, "{report}");
}

/// A deleted newest journal or snapshot: the controller had started from what was left,
/// losing every job in it without a word. A snapshot cut short is refused the same way.
#[test]
fn a_missing_journal_or_snapshot_is_refused() {
    let mut c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let ids: Vec<u32> = (0..5).map(|_| c.submit(&["--hold", "--wrap", "true"])).collect();
    c.kill_controller();
    let jdir = journal_dir(&c);
    for (victim, cut) in [(newest_segment(&jdir), false), (jdir.join("snapshot"), false), (jdir.join("snapshot"), true)]
    {
        let saved = std::fs::read(&victim).unwrap();
        if cut {
            std::fs::write(&victim, &saved[..saved.len() - 1]).unwrap();
        } else {
            std::fs::remove_file(&victim).unwrap();
        }
        let name = victim.file_name().unwrap().to_str().unwrap().to_string();
        expect_refusal(&mut c, &name);
        let (code, report) = check_state(&c, false);
        assert_eq!(code, 1, "{report}");
        assert!(report.contains(&format!("DAMAGE: {}", victim.display())), "{report}");
        std::fs::write(&victim, saved).unwrap();
    }
    c.start_controller();
    wait_controller(&c);
    assert_eq!(pending_ids(&c), ids, "put back, nothing was lost");
}

/// State written by a newer Drover (its snapshot says a later state version): refused, not
/// misread.
#[test]
fn state_of_a_newer_version_is_refused() {
    use drover_journal::format::{SegHeader, SnapHeader, SEG_HDR, SNAP_HDR};
    let mut c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    c.submit(&["--hold", "--wrap", "true"]);
    c.kill_controller();
    let jdir = journal_dir(&c);
    let snap = std::fs::read(jdir.join("snapshot")).unwrap();
    let mut h = SnapHeader::decode(&snap).expect("a snapshot header");
    h.schema += 1;
    let mut newer = h.encode().to_vec();
    newer.extend_from_slice(&snap[SNAP_HDR..]);
    std::fs::write(jdir.join("snapshot"), newer).unwrap();
    // Its segment names the snapshot by its header: as the newer version wrote it.
    let seg = newest_segment(&jdir);
    let mut data = std::fs::read(&seg).unwrap();
    let mut sh = SegHeader::decode(&data).unwrap();
    sh.snapshot_id = h.id();
    data[..SEG_HDR].copy_from_slice(&sh.encode());
    std::fs::write(&seg, data).unwrap();
    c.start_controller();
    assert!(!c.controller_exit(Duration::from_secs(20)).expect("refused").success());
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    let want = format!("written by a newer Drover (state version {}; this one reads up to {})", h.schema, h.schema - 1);
    assert!(log.contains(&want), "{log}");
}

/// State written by the previous version (`testdata/state-v3`: a snapshot, and the older
/// journal file that holds the jobs' scripts and environments): read, written again at once in
/// this version, and its jobs run from their requests as they were journalled, the renamed one
/// with its new name and limit, the array after its dependency.
#[test]
fn state_of_the_previous_version_is_read_and_its_jobs_run() {
    use drover_journal::format::SnapHeader;
    if !root_or_skip("the fixture's jobs are root's") {
        return;
    }
    let mut c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    c.kill_controller();
    let jdir = journal_dir(&c);
    std::fs::remove_dir_all(&jdir).unwrap();
    std::fs::create_dir(&jdir).unwrap();
    for e in std::fs::read_dir(drover_testkit::testdata("state-v3/journal")).unwrap().flatten() {
        std::fs::copy(e.path(), jdir.join(e.file_name())).unwrap();
    }
    let old = SnapHeader::decode(&std::fs::read(jdir.join("snapshot")).unwrap()).unwrap();
    assert_eq!(old.schema, 3);
    c.start_controller();
    wait_controller(&c);
    let now = SnapHeader::decode(&std::fs::read(jdir.join("snapshot")).unwrap()).unwrap();
    assert!(now.schema > 3 && now.generation > old.generation, "written again in this version: {now:?}");
    assert!(jdir.join("journal.1").exists(), "the file with the scripts is kept");
    let show = |id: u32| c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show(2).contains("JobName=v3-renamed") && show(2).contains("TimeLimit=00:30:00"), "{}", show(2));
    assert!(show(1).contains("Comment=from v3") && show(1).contains("Nice=5"), "{}", show(1));
    assert_eq!(c.submit(&["--hold", "--wrap", "true"]), 5, "ids go on from the old state's");

    c.ok("scontrol", &["release", "1,2"]);
    // The script tests the environment and directory it was submitted with.
    c.wait_state(1, &["COMPLETED"], Duration::from_secs(30));
    c.wait_state(2, &["FAILED"], Duration::from_secs(30));
    assert!(show(2).contains("ExitCode=7:0"), "{}", show(2));
    c.ok("scontrol", &["release", "3"]);
    c.wait_until("the array's three tasks to complete", Duration::from_secs(60), || {
        c.ok("scontrol", &["show", "job", "3"]).matches("JobState=COMPLETED").count() == 3
    });
    c.kill_controller();
    let (code, report) = check_state(&c, false);
    assert_eq!(code, 0, "{report}");
}

fn mount_tmpfs(at: &Path, size: &str) -> bool {
    std::fs::create_dir_all(at).unwrap();
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
        .arg(at)
        .status()
        .unwrap()
        .success()
}

struct Unmount(PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// StateSaveLocation on a file system that fills up (a tmpfs, root only): the controller
/// had exited and every command then saw only "Unable to contact slurm controller". Now new
/// work is refused in one line, reads and cancels go on, and once there is room again
/// submissions are accepted by themselves; nothing acknowledged is lost.
#[test]
fn a_full_state_disk_refuses_new_work_keeps_reads_and_resumes() {
    if !root_or_skip("mounting a tmpfs for StateSaveLocation needs root") {
        return;
    }
    let base = tempfile::Builder::new().prefix("drover-full-").tempdir().unwrap();
    let state = base.path().join("state");
    assert!(mount_tmpfs(&state, "32m"), "mount a tmpfs");
    let _unmount = Unmount(state.clone());
    let mut c = Cluster::start(
        EXE,
        Options { nodes: 1, extra_conf: format!("StateSaveLocation={}\n", state.display()), ..Default::default() },
    );
    let mut accepted: Vec<u32> = (0..3).map(|_| c.submit(&["--hold", "--wrap", "true"])).collect();
    // Fill what is left, then submit 1-MiB scripts until the journal's room ahead runs low.
    let filler = state.join("filler");
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!("dd if=/dev/zero of={} bs=1M 2>/dev/null; sync", filler.display()))
        .status()
        .unwrap();
    let _ = st;
    let script = c.path().join("big.sh");
    let mut body = String::from("#!/bin/sh\n");
    while body.len() < 1 << 20 {
        body.push_str("# ..............................................................\n");
    }
    body.push_str("true\n");
    std::fs::write(&script, body).unwrap();
    let mut refusal = None;
    for _ in 0..30 {
        let out = c.run("sbatch", &["--hold", script.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            accepted.push(stdout.trim().rsplit(' ').next().unwrap().parse().unwrap());
        } else {
            refusal = Some(String::from_utf8_lossy(&out.stderr).to_string());
            break;
        }
    }
    let refusal = refusal.expect("a full StateSaveLocation refuses new work");
    assert_eq!(
        refusal.trim(),
        "sbatch: error: Batch job submission failed: StateSaveLocation is full: the controller takes no new work \
         until it has room"
    );
    // Reads go on, and a cancel (less work) is taken.
    assert_eq!(pending_ids(&c), accepted);
    c.ok("scancel", &[&accepted[0].to_string()]);
    c.wait_state(accepted[0], &["CANCELLED"], Duration::from_secs(10));
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert_eq!(log.matches("StateSaveLocation is full").count(), 1, "logged once, not per request:\n{log}");

    std::fs::remove_file(&filler).unwrap();
    c.wait_until("submissions to be accepted again", Duration::from_secs(10), || {
        c.run("sbatch", &["--hold", "--wrap", "true"]).status.success()
    });
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert!(log.contains("StateSaveLocation can be written again"), "{log}");
    // Nothing acknowledged was lost.
    let before = c.ok("squeue", &["-h", "-t", "all", "-o", "%i %T"]);
    c.kill_controller();
    c.start_controller();
    wait_controller(&c);
    assert_eq!(c.ok("squeue", &["-h", "-t", "all", "-o", "%i %T"]), before);
    drop(c);
}
