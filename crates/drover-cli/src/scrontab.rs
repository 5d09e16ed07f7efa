//! `scrontab`: set, edit, list and remove a user's crontab of recurring batch jobs (Slurm's
//! scrontab(1)). The controller keeps the crontab and a job for each entry; this command reads
//! the file, turns each entry (with the `#SCRON` options before it) into a batch job's request
//! as Slurm's scrontab does, and sends them together.

use crate::common;
use clap::Parser;
use drover_model::cron::Schedule;
use drover_model::job::JobSpec;
use drover_proto::v1;
use std::io::{IsTerminal, Read, Write};

const USAGE: &str = "Usage: scrontab [-u user] [-e | -l | -r] [file]\n";

/// What the editor starts with when the user has no crontab yet.
const DEFAULT_CRONTAB: &str = "\
# Welcome to scrontab, Slurm's cron-like interface.
#
# Edit this file to submit recurring jobs to be run by Slurm.
#
# Note that jobs will be run based on the Slurm controller's
# time and timezone.
#
# Lines must either be valid entries, comments (start with '#'),
# or blank.
#
# Lines starting with #SCRON will be parsed for options to use
# with the next cron line. E.g., \"#SCRON --time 1\" would request
# a one minute timelimit to be applied. See the sbatch man page
# for options, although note that not all options are supported
# here.
#
# For example, the following line (when uncommented) would request
# a job be run at 5am each day.
# 0 5 * * * /my/script/to/run
#
# min hour day-of-month month day-of-week command
";

fn fatal(m: &str) -> i32 {
    eprintln!("scrontab: fatal: {m}");
    1
}

#[derive(Default)]
struct Opts {
    edit: bool,
    list: bool,
    remove: bool,
    user: Option<String>,
    file: Option<String>,
}

fn parse_args(args: &[String]) -> Result<Opts, ()> {
    let mut o = Opts::default();
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            rest.extend(it.by_ref().cloned());
            break;
        }
        let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
            rest.push(a.clone());
            continue;
        };
        // getopt's "elru:v": flags may be bundled; -u takes the rest or the next word.
        for (i, c) in flags.char_indices() {
            match c {
                'e' => o.edit = true,
                'l' => o.list = true,
                'r' => o.remove = true,
                'v' => {}
                'u' => {
                    let v = &flags[i + 1..];
                    o.user = Some(if v.is_empty() { it.next().cloned().ok_or(())? } else { v.to_string() });
                    break;
                }
                _ => return Err(()),
            }
        }
    }
    if o.edit || o.list || o.remove {
        if !rest.is_empty() {
            return Err(());
        }
    } else if rest.len() > 1 {
        return Err(());
    } else {
        o.file = rest.pop();
    }
    Ok(o)
}

/// One entry's job, or the lines (`"3"`, `"2-4"`, from 1) that are wrong, and why.
type Parsed = Result<Vec<JobSpec>, (String, String)>;

/// The user the jobs run as: uid, gid, name and home.
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
    pub home: String,
}

/// A `NAME=value` line (value optionally quoted), as crontab(5) sets a variable.
fn env_setting(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let v = value.trim();
    let v = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(v);
    Some((name.to_string(), v.to_string()))
}

/// The crontab's entries as batch jobs, as Slurm's scrontab builds them: the `#SCRON` options
/// before an entry apply to it alone; its script runs the command with `/bin/sh` in the
/// user's home (unless `--chdir`), named after the command's first word (unless
/// `--job-name`), with the user's login environment; `$NAME` of a variable set above is
/// replaced in commands.
pub fn parse(text: &str, owner: &Owner) -> Parsed {
    let mut jobs = Vec::new();
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let mut directives = String::new();
    let mut first: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let t = line.trim_start_matches([' ', '\t']);
        if t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("#SCRON") {
            first.get_or_insert(n);
            directives.push_str(line);
            directives.push('\n');
            match crate::jobopts::shell_words(rest) {
                Ok(w) => options.extend(w),
                Err(e) => return Err((n.to_string(), e)),
            }
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = env_setting(t) {
            vars.retain(|(n, _)| *n != k);
            vars.push((k, v));
            continue;
        }
        let lines = match first.take() {
            Some(f) => format!("{f}-{n}"),
            None => n.to_string(),
        };
        let (_, mut command) = Schedule::parse_line(t).map_err(|e| (lines.clone(), e))?;
        for (k, v) in &vars {
            command = command.replace(&format!("${k}"), v);
        }
        let args = std::iter::once("scrontab".to_string()).chain(std::mem::take(&mut options));
        let parsed = crate::jobopts::JobArgs::try_parse_from(args).map_err(|e| {
            let first = e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_string();
            (lines.clone(), first)
        })?;
        let mut spec =
            parsed.validate(true).map_err(|e| (lines.clone(), e.lines().last().unwrap_or_default().into()))?.spec;
        let when = Schedule::time_part(t);
        spec.script = format!(
            "#!/bin/sh\n# This job was submitted through scrontab\n{directives}# crontab time request was: '{when}'\n{command}\n"
        );
        directives.clear();
        spec.name =
            parsed.job_name.clone().unwrap_or_else(|| command.split(' ').next().unwrap_or_default().to_string());
        if parsed.chdir.is_none() {
            spec.work_dir = owner.home.clone();
        }
        // The job runs in its user's login environment, as cron gives one.
        spec.environment = vec![("SLURM_GET_USER_ENV".into(), "1".into())];
        spec.argv = vec![command];
        spec.batch = true;
        spec.uid = owner.uid;
        spec.gid = owner.gid;
        spec.user = owner.name.clone();
        spec.cron = Some(when);
        let (a, b) = lines.split_once('-').unwrap_or((&lines, &lines));
        spec.cron_lines = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
        spec.submit_line = "scrontab".into();
        jobs.push(spec);
    }
    Ok(jobs)
}

fn owner_of(user: Option<&str>) -> Result<Owner, String> {
    let u = match user {
        Some(name) => {
            let by_name = nix::unistd::User::from_name(name).ok().flatten();
            let by_id = name.parse::<u32>().ok().and_then(|n| nix::unistd::User::from_uid(n.into()).ok().flatten());
            by_name.or(by_id).ok_or_else(|| format!("Could not find user {name}"))?
        }
        None => nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .ok_or_else(|| format!("getpwuid({}) failed", nix::unistd::getuid()))?,
    };
    Ok(Owner { uid: u.uid.as_raw(), gid: u.gid.as_raw(), name: u.name, home: u.dir.display().to_string() })
}

/// The text after the user's editor ($VISUAL, $EDITOR, else vi) had it.
fn edit(text: &str) -> Result<String, String> {
    let dir = std::env::var("TMPDIR").ok().filter(|d| !d.is_empty()).unwrap_or_else(|| "/tmp".into());
    let mut f = tempfile::Builder::new()
        .prefix("scrontab-")
        .tempfile_in(&dir)
        .map_err(|e| format!("error creating temp crontab file '{dir}/scrontab-XXXXXX': {e}"))?;
    f.write_all(text.as_bytes()).map_err(|e| format!("error writing to temp crontab file: {e}"))?;
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "vi".into());
    let st = std::process::Command::new(&editor)
        .arg(f.path())
        .status()
        .map_err(|_| "editor returned non-zero exit code".to_string())?;
    if !st.success() {
        return Err("editor returned non-zero exit code".into());
    }
    std::fs::read_to_string(f.path()).map_err(|e| format!("error reopening temp crontab file: {e}"))
}

/// Lines `spec` (`"3"`, `"2-4"`, from 1) of `text` prefixed with `#BAD: `.
fn mark_bad(text: &str, spec: &str) -> String {
    let (a, b) = spec.split_once('-').unwrap_or((spec, spec));
    let (a, b): (usize, usize) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if (a..=b).contains(&(i + 1)) {
            out.push_str("#BAD: ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn ask_retry(what: &str) -> bool {
    loop {
        print!("{what}Do you want to retry the edit? (y/n) ");
        let _ = std::io::stdout().flush();
        let mut b = [0u8; 1];
        loop {
            match std::io::stdin().read(&mut b) {
                Ok(1) if b[0].is_ascii_alphabetic() => break,
                Ok(1) => continue,
                _ => return false,
            }
        }
        match b[0].to_ascii_lowercase() {
            b'y' => return true,
            b'n' => return false,
            _ => {}
        }
    }
}

pub fn main(args: Vec<String>) -> i32 {
    let Ok(o) = parse_args(&args) else {
        eprint!("{USAGE}");
        return 1;
    };
    let cfg = match common::load_config() {
        Ok(c) => c,
        Err(e) => return fatal(&e),
    };
    if !cfg.scron_enabled {
        return fatal("scrontab is disabled on this cluster");
    }
    let owner = match owner_of(o.user.as_deref()) {
        Ok(w) => w,
        Err(e) => return fatal(&e),
    };
    let interactive = std::io::stdin().is_terminal();
    if o.edit && !interactive {
        return fatal("Standard input is not a TTY");
    }
    let first_form = !(o.edit || o.list || o.remove) && (o.file.is_some() || !interactive);
    let editing = o.edit || !(o.list || o.remove || first_form);
    let mut text = String::new();
    if first_form {
        let r = match o.file.as_deref() {
            None | Some("-") => std::io::stdin().read_to_string(&mut text).map(|_| ()),
            Some(p) => std::fs::read_to_string(p).map(|t| text = t),
        };
        if r.is_err() {
            return fatal(&format!("failed to open {}", o.file.as_deref().unwrap_or("-")));
        }
    }
    let rt = common::runtime();
    rt.block_on(async move {
        let mut client = match common::connect(&cfg).await {
            Ok(c) => c,
            Err(e) => return fatal(&e),
        };
        if o.remove {
            let req = v1::CrontabUpdate { uid: owner.uid, remove: true, ..Default::default() };
            return match client.update_crontab(req).await {
                Ok(_) => 0,
                Err(s) => fatal(&format!("slurm_remove_crontab failed: {}", common::status_msg(&s))),
            };
        }
        if o.list || editing {
            match client.get_crontab(v1::CrontabRequest { uid: owner.uid }).await {
                Ok(r) => {
                    let r = r.into_inner();
                    if o.list {
                        if !r.found {
                            println!("no crontab for {}", owner.name);
                            return 1;
                        }
                        common::write_stdout(r.text.as_bytes());
                        return 0;
                    }
                    text = if r.found { r.text } else { DEFAULT_CRONTAB.to_string() };
                }
                Err(s) => return fatal(&format!("slurm_request_crontab failed: {}", common::status_msg(&s))),
            }
        }
        loop {
            if editing {
                text = match edit(&text) {
                    Ok(t) => t,
                    Err(e) => return fatal(&e),
                };
            }
            let (failed, error) = match parse(&text, &owner) {
                Err((lines, why)) => {
                    eprintln!("scrontab: error: line {lines}: {why}");
                    if !editing {
                        println!("There are errors in your crontab.");
                        return 1;
                    }
                    if !ask_retry("There are errors in your crontab.\nThe failed line(s) is commented out with #BAD:\n") {
                        return 0;
                    }
                    text = mark_bad(&text, &lines);
                    continue;
                }
                Ok(jobs) => {
                    let jobs = jobs.iter().map(drover_proto::spec_to_wire).collect();
                    let req = v1::CrontabUpdate { uid: owner.uid, text: text.clone(), jobs, remove: false };
                    match client.update_crontab(req).await {
                        Ok(r) => {
                            let r = r.into_inner();
                            if r.failed_lines.is_empty() {
                                return 0;
                            }
                            (r.failed_lines, r.error)
                        }
                        Err(s) => return fatal(&format!("slurm_update_crontab failed: {}", common::status_msg(&s))),
                    }
                }
            };
            let what = format!(
                "There was an issue with the job submission on lines {failed}\nThe error code return was: {error}\nThe error message was: {error}\n"
            );
            if !editing {
                print!("{what}");
                return 1;
            }
            if !ask_retry(&format!("{what}The failed lines are commented out with #BAD:\n")) {
                return 0;
            }
            text = mark_bad(&text, &failed);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Owner {
        Owner { uid: 2001, gid: 2001, name: "alice".into(), home: "/home/alice".into() }
    }

    #[test]
    fn entries_become_jobs_with_their_options_and_lines() {
        let text = "# a comment\nDIR=/scratch\n\n#SCRON -t 5\n#SCRON --job-name=purge\n0 3 * * * find $DIR -atime +30 -delete\n@hourly echo hi there\n";
        let jobs = parse(text, &alice()).unwrap();
        assert_eq!(jobs.len(), 2);
        let (p, h) = (&jobs[0], &jobs[1]);
        assert_eq!(p.name, "purge");
        assert_eq!(p.time_limit, Some(Some(300)));
        assert_eq!(p.cron.as_deref(), Some("0 3 * * *"));
        assert_eq!(p.cron_lines, (4, 6));
        assert_eq!(
            p.script,
            "#!/bin/sh\n# This job was submitted through scrontab\n#SCRON -t 5\n#SCRON --job-name=purge\n\
             # crontab time request was: '0 3 * * *'\nfind /scratch -atime +30 -delete\n"
        );
        assert_eq!(p.work_dir, "/home/alice");
        assert_eq!(p.environment, [("SLURM_GET_USER_ENV".to_string(), "1".to_string())]);
        // Options are the entry's own: the next has none of them.
        assert_eq!(h.name, "echo");
        assert_eq!(h.time_limit, None);
        assert_eq!(h.cron.as_deref(), Some("@hourly"));
        assert_eq!(h.cron_lines, (7, 7));
    }

    #[test]
    fn a_bad_line_is_named() {
        let e = parse("0 3 * * * ok\n\n61 * * * * bad\n", &alice()).unwrap_err();
        assert_eq!(e, ("3".to_string(), "minute 61 is out of range 0-59".to_string()));
        let e = parse("#SCRON --bogus\n0 3 * * * x\n", &alice()).unwrap_err();
        assert_eq!(e.0, "1-2");
        assert_eq!(mark_bad("a\nb\nc\n", "2-3"), "a\n#BAD: b\n#BAD: c\n");
    }

    #[test]
    fn options_as_getopt_reads_them() {
        let a = |v: &[&str]| parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(a(&["-l"]).unwrap().list);
        let o = a(&["-lu", "bob"]).unwrap();
        assert!(o.list && o.user.as_deref() == Some("bob"));
        assert_eq!(a(&["-ubob", "-r"]).unwrap().user.as_deref(), Some("bob"));
        assert_eq!(a(&["file"]).unwrap().file.as_deref(), Some("file"));
        assert!(a(&["-l", "file"]).is_err());
        assert!(a(&["-x"]).is_err());
        assert!(a(&["a", "b"]).is_err());
    }
}
