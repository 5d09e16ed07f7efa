//! `drover`: dispatches by the name it was invoked under (`sbatch`, `squeue`, ...) and by
//! subcommand (`drover controller`, `drover node`, `drover up`, ...). Nothing else lives here.

#![no_main]

use std::path::PathBuf;

fn usage() -> i32 {
    eprintln!(
        "usage: drover <command>\n\
         \n\
         \x20 up [--nodes N] [--detach] [--state-dir DIR]   start a local cluster\n\
         \x20 down [--state-dir DIR]                         stop it\n\
         \x20 controller [-f slurm.conf] [--host NAME]       run the controller (slurmctld; NAME: which SlurmctldHost this is)\n\
         \x20 controller --check-state [DIR] [--salvage]    check its state (StateSaveLocation by default; salvage: recover what is intact)\n\
         \x20 node [-f slurm.conf] [-N name]                 run a node agent (slurmd)\n\
         \x20 node --conf-server HOST[:PORT] [--key-file K]  ... fetching the configuration (configless)\n\
         \x20 sackd [-f slurm.conf | --conf-server HOST]     hand local users credentials (a login host)\n\
         \x20 accounting [-f slurmdbd.conf]                  run the accounting service (slurmdbd)\n\
         \x20 install-links DIR                              create sbatch, squeue, ... links\n\
         \x20 bench [--quick] [--only NAME]                  measure speed and memory on a local cluster\n\
         \x20 bench accounting [--rows N] [--url URL]        measure the accounting stores and sacct\n\
         \x20 sim TRACE.swf[.gz] --procs N --policy P       replay a workload trace through the scheduler\n\
         \x20 sim --now [--hours H] [--json]                the live queue's next hours, by its own scheduler\n\
         \x20 explain JOBID                                  why a job waits, and its priority, in words\n\
         \x20 sbatch|srun|salloc|squeue|sinfo|scancel|scontrol|sacct ... run a command\n\
         \x20 version"
    );
    2
}

/// The host's `slurm.conf`: fetched from the controller with `--conf-server HOST[:PORT]`
/// (configless mode; `--key-file` names auth/slurm's key), else `-f` / `SLURM_CONF`.
fn configless(args: &[String]) -> Result<PathBuf, drover_node::NodeError> {
    match opt(args, "--conf-server", "--conf-server") {
        Some(server) => {
            let key = opt(args, "--key-file", "--key-file")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(drover_node::configless::DEFAULT_KEY_FILE));
            runtime().block_on(drover_node::configless::fetch(&server, &key))
        }
        None => Ok(conf_arg(args)),
    }
}

fn conf_arg(args: &[String]) -> PathBuf {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-f" || a == "--conf" {
            if let Some(p) = it.next() {
                return PathBuf::from(p);
            }
        }
    }
    drover_cli::common::conf_path()
}

fn opt(args: &[String], short: &str, long: &str) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == short || a == long {
            return it.next().cloned();
        }
    }
    None
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("invariant: a runtime starts")
}

/// The process's entry point, in place of std's `lang_start`.
///
/// Every command is a new process of this binary, and std's start-up spent a tenth of
/// `sbatch`'s instructions finding the main thread's stack (glibc's `pthread_getattr_np`
/// reads and `sscanf`s `/proc/self/maps`) to install its stack-overflow handler, plus the
/// handler's alternate stack. This keeps the rest of what std's start-up does for us:
/// closed standard descriptors reopened on `/dev/null`, `SIGPIPE` ignored (writes to a closed
/// pipe or socket fail with `EPIPE`, and std still restores the default in the processes it
/// spawns), exit code 101 for a panic. `std::env::args` needs nothing here on glibc (std reads the
/// arguments from `.init_array`), and `process::exit` flushes standard output. A stack
/// overflow is now a plain SIGSEGV without std's message.
#[no_mangle]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    standard_fds_open();
    // SAFETY: setting a signal's disposition to SIG_IGN has no handler to be unsafe about.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    quiet_on_closed_stdout();
    match std::panic::catch_unwind(run) {
        Ok(()) => 0,
        Err(_) => 101,
    }
}

/// `squeue | head`: once the reader has gone, a command's next line of output ends it as
/// SIGPIPE ends Slurm's commands, silently and by that signal, instead of with a panic's
/// message ("failed printing to stdout: Broken pipe") and a backtrace. SIGPIPE stays ignored
/// for everything else, so a socket whose peer went away is an error the program handles.
fn quiet_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p.downcast_ref::<String>().map(String::as_str).or_else(|| p.downcast_ref::<&str>().copied());
        if msg.is_some_and(|m| m.starts_with("failed printing to stdout") && m.contains("Broken pipe")) {
            // SAFETY: restoring the default disposition and raising the signal end the process
            // as the C library's commands end; nothing runs after it.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
        }
        report(info);
    }));
}

/// Descriptors 0, 1 and 2 that are closed get `/dev/null`, so that a file or socket opened
/// later is never taken for standard output (as std's start-up does).
fn standard_fds_open() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: `fds` is a valid array of three pollfd for the call's duration.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } < 0 {
        return;
    }
    for f in fds.iter().filter(|f| f.revents & libc::POLLNVAL != 0) {
        // SAFETY: a NUL-terminated path; the lowest free descriptor is the closed one.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if fd >= 0 && fd != f.fd {
            // SAFETY: plain descriptor calls on descriptors this function owns.
            unsafe {
                libc::dup2(fd, f.fd);
                libc::close(fd);
            }
        }
    }
}

fn run() {
    let mut argv: Vec<String> = drover_cli::common::args();
    let prog = argv
        .first()
        .map(|a| std::path::Path::new(a).file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default())
        .unwrap_or_default();
    let rest: Vec<String> = argv.split_off(1.min(argv.len()));
    if let Some(code) = drover_cli::run(&prog, rest.clone()) {
        std::process::exit(code);
    }
    let Some(sub) = rest.first().cloned() else { std::process::exit(usage()) };
    let args: Vec<String> = rest[1..].to_vec();
    if let Some(code) = drover_cli::run(&sub, args.clone()) {
        std::process::exit(code);
    }
    let code = match sub.as_str() {
        "controller" if args.iter().any(|a| a == "--check-state" || a.starts_with("--check-state=")) => {
            let eq = args.iter().find_map(|a| a.strip_prefix("--check-state=").map(str::to_string));
            let dir = eq.or_else(|| opt(&args, "--check-state", "--check-state")).filter(|d| !d.starts_with('-'));
            // Without a directory: slurm.conf's StateSaveLocation (-f, SLURM_CONF, the default).
            let dir = match dir {
                Some(d) => Ok(PathBuf::from(d)),
                None => drover_controller::check::state_dir_of(&conf_arg(&args)),
            };
            match dir {
                Ok(dir) => drover_controller::check::check_state(&dir, args.iter().any(|a| a == "--salvage")),
                Err(e) => {
                    eprintln!("drover controller: error: {e}");
                    1
                }
            }
        }
        "controller" => match runtime()
            .block_on(drover_controller::run(&conf_arg(&args), opt(&args, "--host", "--host").as_deref()))
        {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("drover controller: fatal: {e}");
                1
            }
        },
        "node" => {
            let name = opt(&args, "-N", "--name");
            let run = configless(&args).and_then(|conf| runtime().block_on(drover_node::run(&conf, name.as_deref())));
            match run {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("drover node: fatal: {e}");
                    1
                }
            }
        }
        "sackd" => match configless(&args).and_then(|conf| runtime().block_on(drover_node::sackd(&conf))) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("drover sackd: fatal: {e}");
                1
            }
        },
        "accounting" => {
            let conf = opt(&args, "-f", "--conf")
                .map(PathBuf::from)
                .unwrap_or_else(|| drover_cli::common::conf_path().with_file_name("slurmdbd.conf"));
            match runtime().block_on(drover_accounting::run(&conf)) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("drover accounting: fatal: {e}");
                    1
                }
            }
        }
        "supervise" => match args.first() {
            Some(dir) => drover_node::supervisor::supervise(std::path::Path::new(dir)),
            None => usage(),
        },
        "up" => {
            use clap::Parser;
            match drover_cli::up::UpArgs::try_parse_from(std::iter::once("drover up".to_string()).chain(args)) {
                Ok(a) => drover_cli::up::up(a),
                Err(e) => {
                    let _ = e.print();
                    2
                }
            }
        }
        "down" => {
            use clap::Parser;
            match drover_cli::up::DownArgs::try_parse_from(std::iter::once("drover down".to_string()).chain(args)) {
                Ok(a) => drover_cli::up::down(a),
                Err(e) => {
                    let _ = e.print();
                    2
                }
            }
        }
        "bench" if args.first().is_some_and(|a| a == "accounting") => drover_accounting::bench::main(&args[1..]),
        "bench" => {
            use clap::Parser;
            match drover_cli::bench::BenchArgs::try_parse_from(std::iter::once("drover bench".to_string()).chain(args))
            {
                Ok(a) => drover_cli::bench::main(a),
                Err(e) => {
                    let _ = e.print();
                    2
                }
            }
        }
        "explain" => drover_cli::explain::main(args),
        "sim" => {
            use clap::Parser;
            match drover_sim::cli::SimArgs::try_parse_from(std::iter::once("drover sim".to_string()).chain(args)) {
                Ok(a) if a.now => {
                    drover_cli::forecast::main(&drover_cli::forecast::Args { hours: a.hours, json: a.json })
                }
                Ok(a) => drover_sim::cli::main(a),
                Err(e) => {
                    let _ = e.print();
                    2
                }
            }
        }
        "install-links" => match args.first() {
            Some(d) => match drover_cli::up::install_links(std::path::Path::new(d)) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("drover install-links: error: {e}");
                    1
                }
            },
            None => usage(),
        },
        "version" | "--version" | "-V" => {
            println!("drover {} (slurm {} compatible)", env!("CARGO_PKG_VERSION"), drover_model_version());
            0
        }
        _ => usage(),
    };
    std::process::exit(code);
}

fn drover_model_version() -> &'static str {
    drover_controller::SLURM_VERSION
}

/// The C library's `pow`, from the `libm` crate. Two callers need it (tokio's scheduler
/// statistics and the fair-share decay, which calls `libm` itself) and nothing else of libm;
/// defined here, the link resolves it in the binary and drops libm.so, which every command
/// process would otherwise load: ~0.1 ms and 9 page faults of each `sbatch`'s start.
#[no_mangle]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}
