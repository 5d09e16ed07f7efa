//! `sbatch`: submit a batch script.

use crate::common::{self, status_msg};
use crate::jobopts::{directives, env_args, JobArgs};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;
use drover_proto::v1;
use std::io::Read;

#[derive(Parser, Debug)]
#[command(
    name = "sbatch",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct SbatchArgs {
    #[command(flatten)]
    job: JobArgs,
    #[arg(long = "parsable")]
    parsable: bool,
    #[arg(long = "test-only")]
    test_only: bool,
    #[arg(short = 'W', long = "wait")]
    wait: bool,
    #[arg(long = "wrap")]
    wrap: Option<String>,
    /// `-m`: the default layout of the job's steps (`SLURM_DISTRIBUTION` in its environment).
    #[arg(short = 'm', long = "distribution")]
    distribution: Option<String>,
    #[arg(short = 'V', long = "version")]
    version: bool,
    #[arg(short = 'h', long = "help")]
    help: bool,
    #[arg(long = "usage")]
    usage: bool,
    /// The script and its arguments; option parsing stops at the script path.
    #[arg(trailing_var_arg = true, allow_hyphen_values = false)]
    script: Vec<String>,
}

/// getopt's words for an option the command does not have.
pub fn unrecognized(prog: &str, arg: &str) -> String {
    format!("{prog}: unrecognized option '{arg}'\nTry \"{prog} --help\" for more information")
}

/// Turns a clap error into Slurm's wording.
pub fn clap_error(prog: &str, e: &clap::Error) -> String {
    clap_error_in(prog, e, &[])
}

/// [`clap_error`], with the words of the command line: an unknown `--name=value` is named
/// whole, as getopt names it.
pub fn clap_error_in(prog: &str, e: &clap::Error, args: &[String]) -> String {
    let mut arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    if e.kind() == ErrorKind::UnknownArgument && arg.starts_with("--") && !arg.contains('=') {
        if let Some(whole) = args.iter().find(|a| a.strip_prefix(arg.as_str()).is_some_and(|r| r.starts_with('='))) {
            arg = whole.clone();
        }
    }
    match e.kind() {
        ErrorKind::UnknownArgument => unrecognized(prog, &arg),
        ErrorKind::InvalidValue | ErrorKind::NoEquals => {
            let name = arg.split_whitespace().next().unwrap_or(&arg).split('=').next().unwrap_or("").to_string();
            // getopt's two wordings: a short option by its letter, a long one by its name.
            match name.strip_prefix('-').filter(|n| n.len() == 1) {
                Some(letter) => format!(
                    "{prog}: option requires an argument -- '{letter}'\nTry \"{prog} --help\" for more information"
                ),
                None => {
                    format!("{prog}: option '{name}' requires an argument\nTry \"{prog} --help\" for more information")
                }
            }
        }
        _ => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
            format!("{prog}: error: {first}")
        }
    }
}

/// Whether Slurm 22.05's sbatch has the option (`--name` or `-X`), by its own `--help` and
/// `--usage` texts (kept in `help/`).
fn slurm_knows(option: &str) -> bool {
    // sbatch's options its help leaves out (its man page has them).
    const MAN_ONLY: &[&str] = &[
        "--acctg-freq",
        "--batch",
        "--kill-on-invalid-dep",
        "--network",
        "--ntasks-per-gpu",
        "--open-mode",
        "--prefer",
        "--test-only",
        "--tres-per-task",
        "--wait-all-nodes",
    ];
    if MAN_ONLY.contains(&option) {
        return true;
    }
    let texts = [include_str!("../help/sbatch.help"), include_str!("../help/sbatch.usage")];
    let word_end = |t: &str, at: usize| t[at..].chars().next().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'));
    texts.iter().any(|t| {
        t.match_indices(option).any(|(at, _)| {
            let before = t[..at].chars().next_back();
            !matches!(before, Some(c) if c.is_ascii_alphanumeric() || c == '-') && word_end(t, at + option.len())
        })
    })
}

/// The exit status of a command line its parser refused: sbatch, srun and salloc leave with
/// 255 (`exit(-1)`) on an option getopt does not know or that lacks its value, the others 1.
pub fn clap_status(prog: &str, e: &clap::Error) -> i32 {
    let getopt = matches!(e.kind(), ErrorKind::UnknownArgument | ErrorKind::InvalidValue | ErrorKind::NoEquals);
    if getopt && matches!(prog, "sbatch" | "srun" | "salloc") {
        255
    } else {
        1
    }
}

pub fn main(args: Vec<String>) -> i32 {
    let mut cli = match SbatchArgs::try_parse_from(std::iter::once("sbatch".to_string()).chain(args.iter().cloned())) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}", clap_error_in("sbatch", &e, &args));
            return clap_status("sbatch", &e);
        }
    };
    if cli.version {
        common::print_version();
        return 0;
    }
    if cli.help || cli.usage {
        return crate::help::print("sbatch", !cli.help);
    }
    use drover_model::bytes;
    use std::os::unix::ffi::OsStrExt;
    // The script and paths as bytes: what is not UTF-8 is kept (drover_model::bytes).
    let (raw, script_name, command) = if let Some(w) = &cli.wrap {
        if !cli.script.is_empty() {
            eprintln!("sbatch: error: Script arguments not permitted with --wrap option");
            return 1;
        }
        let text = format!("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{w}\n");
        (bytes::decode(&text), "wrap".to_string(), None)
    } else if let Some(path) = cli.script.first() {
        let p = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&bytes::decode(path)));
        match std::fs::read(&p) {
            Ok(b) => {
                let name = p.file_name().map(|f| bytes::encode(f.as_bytes())).unwrap_or_default();
                let full = std::fs::canonicalize(&p)
                    .map(|f| bytes::encode(f.as_os_str().as_bytes()))
                    .unwrap_or_else(|_| path.clone());
                (b, name, Some(full))
            }
            Err(_) => {
                eprintln!("sbatch: error: Unable to open file {path}");
                return 1;
            }
        }
    } else {
        let mut b = Vec::new();
        if std::io::stdin().read_to_end(&mut b).is_err() {
            eprintln!("sbatch: error: Unable to read batch script from standard input");
            return 1;
        }
        (b, "sbatch".to_string(), None)
    };
    // Slurm's sanity tests of a script, in its order and words.
    let refusal: &[&str] = if raw.is_empty() {
        &["Batch script is empty!"]
    } else if raw.iter().all(|b| b.is_ascii_whitespace()) {
        &["Batch script contains only whitespace!"]
    } else if !raw.starts_with(b"#!") {
        &[
            "This does not look like a batch script.  The first",
            "line must start with #! followed by the path to an interpreter.",
            "For instance: #!/bin/sh",
        ]
    } else if raw.contains(&0) {
        &["The Slurm controller does not allow scripts that", "contain a NULL character '\\0'."]
    } else if raw.windows(2).any(|w| w == b"\r\n") {
        &["Batch script contains DOS line breaks (\\r\\n)", "instead of expected UNIX line breaks (\\n)."]
    } else {
        &[]
    };
    if !refusal.is_empty() {
        for line in refusal {
            eprintln!("sbatch: error: {line}");
        }
        return 1;
    }
    let script = bytes::encode(&raw);
    let raw_len = raw.len();
    // Directives, then SBATCH_* variables, then the command line: later ones win.
    let mut dir_args = match directives(&script, "#SBATCH") {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sbatch: error: invalid #SBATCH directive: {e}");
            return 1;
        }
    };
    // Directives are parsed alone first, to pass over the options this build does not know
    // (none to check without directives: a `--wrap` submit skips a parse).
    // sbatch's own options (--parsable, --test-only, -W) count there too, as in Slurm.
    while !dir_args.is_empty() {
        match SbatchArgs::try_parse_from(std::iter::once("sbatch".to_string()).chain(dir_args.iter().cloned())) {
            Ok(d) => {
                if let Some(word) = d.script.first() {
                    eprintln!("sbatch: error: Invalid directive found in batch script: {word}");
                    return 255;
                }
                break;
            }
            Err(e) if e.kind() == ErrorKind::UnknownArgument => {
                let bad = match e.get(ContextKind::InvalidArg) {
                    Some(ContextValue::String(s)) => s.clone(),
                    _ => String::new(),
                };
                // Slurm-era scripts carry options of Slurm's this build does not know yet:
                // keep going. One Slurm does not know either is refused, as Slurm refuses it.
                let pos = dir_args.iter().position(|a| *a == bad || a.starts_with(&format!("{bad}=")));
                let Some(pos) = pos.filter(|_| slurm_knows(&bad)) else {
                    eprintln!("{}", clap_error_in("sbatch", &e, &dir_args));
                    return clap_status("sbatch", &e);
                };
                let removed = dir_args.remove(pos);
                eprintln!("sbatch: warning: ignoring unrecognized #SBATCH option '{removed}'");
                // A separate value belongs to the dropped option.
                if !removed.contains('=') && pos < dir_args.len() && !dir_args[pos].starts_with('-') {
                    dir_args.remove(pos);
                }
            }
            Err(e) => {
                eprintln!("{}", clap_error("sbatch", &e));
                return 1;
            }
        }
    }
    let cmdline_opts: Vec<String> = {
        // The command line up to the script path.
        let n = args.len() - cli.script.len();
        args[..n].to_vec()
    };
    let mut from_env = env_args("SBATCH_");
    if std::env::var_os("SBATCH_WAIT").is_some() {
        from_env.push("--wait".into());
    }
    let merged = if dir_args.is_empty() && from_env.is_empty() {
        // The command line alone: its parse above is the merged one.
        std::mem::take(&mut cli.job)
    } else {
        let all: Vec<String> = std::iter::once("sbatch".to_string())
            .chain(dir_args)
            .chain(from_env)
            .chain(strip_wrap(&cmdline_opts))
            .collect();
        match SbatchArgs::try_parse_from(&all) {
            Ok(m) => {
                cli.parsable = m.parsable;
                cli.test_only = m.test_only;
                cli.wait = m.wait;
                cli.distribution = m.distribution;
                m.job
            }
            Err(e) => {
                eprintln!("{}", clap_error("sbatch", &e));
                return 1;
            }
        }
    };
    let validated = match merged.validate(true) {
        Ok(v) => v,
        Err(e) => {
            return crate::jobopts::report("sbatch", &e);
        }
    };
    let mut spec = validated.spec;
    if let Some(d) = &cli.distribution {
        if let Err(e) = drover_model::step::Distribution::parse(d) {
            return crate::jobopts::report("sbatch", &format!("{}{e}", crate::jobopts::EXIT_255));
        }
        // The job's environment has it from its layout, as slurmd sets it.
        crate::jobopts::set_env(&mut spec.environment, "SLURM_DISTRIBUTION", d);
    }
    if let Some(h) = &merged.hint {
        // As sbatch's verify_hint exports it.
        crate::jobopts::set_env(&mut spec.environment, "SLURM_HINT", h);
    }
    spec.name = merged.job_name.clone().unwrap_or(script_name);
    spec.script = script;
    spec.argv =
        std::iter::once(command.clone().unwrap_or_default()).chain(cli.script.iter().skip(1).cloned()).collect();
    spec.submit_line = std::iter::once("sbatch".to_string()).chain(args.iter().cloned()).collect::<Vec<_>>().join(" ");
    let cfg = match common::load_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sbatch: error: {e}");
            return 1;
        }
    };
    let rt = common::runtime();
    rt.block_on(async move {
        let mut client = match common::connect(&cfg).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("sbatch: error: Batch job submission failed: {e}");
                return 1;
            }
        };
        let parts = spec.partitions.clone();
        // The controller refuses a script over max_script_size; one too big to send at all
        // gets the same answer here.
        if raw_len > cfg.max_script_size as usize {
            eprintln!(
                "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long"
            );
            return 1;
        }
        let req = v1::SubmitRequest { spec: Some(drover_proto::spec_to_wire(&spec)), test_only: cli.test_only };
        let reply = match client.submit(req).await {
            Ok(r) => r.into_inner(),
            Err(s) => {
                let msg = status_msg(&s);
                if msg == "Invalid partition name specified" {
                    let bad = parts.iter().find(|p| cfg.partition(p).is_none()).cloned().unwrap_or_default();
                    eprintln!("sbatch: error: invalid partition specified: {bad}");
                }
                eprintln!("sbatch: error: Batch job submission failed: {msg}");
                return 1;
            }
        };
        if cli.test_only {
            let cpus = spec.task_count() * spec.cpus_per_task();
            eprintln!(
                "sbatch: Job {} to start at {} using {} processors on nodes {} in partition {}",
                reply.job_id,
                common::fmt_time(reply.test_start_time),
                cpus,
                reply.test_nodes,
                reply.test_partition
            );
            return 0;
        }
        if cli.parsable {
            println!("{}", reply.job_id);
        } else {
            println!("Submitted batch job {}", reply.job_id);
        }
        if cli.wait {
            return wait_for(&mut client, reply.job_id).await;
        }
        0
    })
}

fn strip_wrap(all: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in all {
        if skip {
            skip = false;
            continue;
        }
        if a == "--wrap" {
            skip = true;
            continue;
        }
        if a.starts_with("--wrap=") {
            continue;
        }
        out.push(a.clone());
    }
    out
}

/// `--wait`: block until the job ends; exit with its exit code.
async fn wait_for(client: &mut common::Client, id: u32) -> i32 {
    let mut stream = match client.watch_job(v1::WatchRequest { job_id: id }).await {
        Ok(s) => s.into_inner(),
        Err(s) => {
            eprintln!("sbatch: error: {}", status_msg(&s));
            return 1;
        }
    };
    while let Ok(Some(ev)) = stream.message().await {
        let Some(job) = ev.job else { continue };
        let state = drover_model::state::JobState::parse(&job.state);
        if state.is_some_and(|s| s.is_finished()) {
            let code = (job.exit_status >> 8) & 0xff;
            let sig = job.exit_status & 0x7f;
            if job.state != "COMPLETED" {
                eprintln!("sbatch: error: Job {id} ended with state {}", job.state);
            }
            return if sig != 0 {
                128 + sig
            } else if code != 0 {
                code
            } else if job.state == "COMPLETED" {
                0
            } else {
                1
            };
        }
    }
    eprintln!("sbatch: error: lost contact with the controller while waiting for job {id}");
    1
}

#[cfg(test)]
mod slurm_options_tests {
    #[test]
    fn sbatchs_own_options_are_told_from_made_up_ones() {
        for known in ["--hint", "--time-min", "--threads-per-core", "--mincpus", "-B", "-Q", "--acctg-freq"] {
            assert!(super::slurm_knows(known), "{known}");
        }
        // (`--hin` is only the start of `--hint`, `-Z` no option of sbatch's.)
        for unknown in ["--bogus", "--hin", "-Z"] {
            assert!(!super::slurm_knows(unknown), "{unknown}");
        }
    }
}
