//! `sattach JOB.STEP`: attaches to a running step's I/O, as Slurm's sattach does: the step's
//! latest output first (what its supervisors kept), then everything it writes until it ends,
//! and this terminal's input to its tasks. Ctrl-C detaches; the step goes on.

use crate::common::{self, status_msg};
use crate::stepio::{IoServer, OutputMode};
use drover_proto::v1;
use std::time::Duration;

pub fn main(args: Vec<String>) -> i32 {
    let mut mode = OutputMode::default();
    let mut input = String::from("all");
    let mut layout = false;
    let mut target: Vec<String> = Vec::new();
    for a in &args {
        let (flag, value) = a.split_once('=').map_or((a.as_str(), None), |(f, v)| (f, Some(v)));
        let task = |v: Option<&str>| v.and_then(|v| v.parse::<u32>().ok());
        match flag {
            "-l" | "--label" => mode.label = true,
            "--layout" => layout = true,
            "-Q" | "--quiet" | "-v" | "--verbose" => {}
            "--input-filter" => input = value.unwrap_or("all").to_string(),
            "--output-filter" => mode.stdout_of = task(value),
            "--error-filter" => mode.stderr_of = task(value),
            "-h" | "--help" => return crate::help::print("sattach", false),
            "-u" | "--usage" => return crate::help::print("sattach", true),
            "-V" | "--version" => {
                crate::common::print_version();
                return 0;
            }
            f if f.starts_with('-') => {
                eprintln!("sattach: unrecognized option '{a}'");
                eprintln!("Try \"sattach --help\" for more information");
                return 1;
            }
            _ => target.push(a.clone()),
        }
    }
    // Slurm's words when the one argument is missing or one too many.
    if target.len() != 1 {
        crate::help::print("sattach", true);
        eprintln!("sattach: error: too many parameters");
        return 1;
    }
    let ids = target[0].split_once('.').and_then(|(j, s)| Some((j.parse::<u32>().ok()?, s.parse::<u32>().ok()?)));
    let Some((job_id, step_id)) = ids else {
        eprintln!("sattach: error: Unable to parse job step id \"{}\"", target[0]);
        return 1;
    };
    let cfg = match common::config_for("sattach") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let io = if layout { None } else { Some(IoServer::start(mode, &cfg)) };
    let io = match io.transpose() {
        Ok(io) => io,
        Err(e) => {
            eprintln!("sattach: error: cannot listen for task I/O: {e}");
            return 1;
        }
    };
    common::runtime().block_on(async move {
        let mut client = match common::connect_or_exit(&cfg, "sattach").await {
            Ok(c) => c,
            Err(code) => return code,
        };
        let req = v1::AttachRequest {
            job_id,
            step_id,
            io_addr: io.as_ref().map(|i| i.addr.clone()).unwrap_or_default(),
            ..Default::default()
        };
        let step = match client.attach_step(req).await {
            Ok(r) => {
                let r = r.into_inner();
                if let Some(io) = &io {
                    io.set_key(&r.io_key);
                }
                r.step.unwrap_or_default()
            }
            Err(s) => {
                eprintln!("sattach: error: Could not get job step info: {}", status_msg(&s));
                return 1;
            }
        };
        let Some(io) = io else {
            print!("{}", layout_text(&step));
            return 0;
        };
        if crate::stepio::stdin_is_ours() {
            io.forward_stdin(&step, &input);
        }
        let nodes = step.nodes.len();
        loop {
            tokio::select! {
                done = io.settle(nodes, Duration::from_secs(3600)) => if done { return 0 },
                _ = tokio::signal::ctrl_c() => return 0,
            }
        }
    })
}

/// `--layout`: the step's tasks by node, as Slurm prints them.
fn layout_text(step: &v1::StepInfo) -> String {
    let ntasks: usize = step.nodes.iter().map(|n| n.task_ids.len()).sum();
    let names: Vec<String> = step.nodes.iter().map(|n| n.node.clone()).collect();
    let mut out = format!(
        "Job step layout:\n\t{ntasks} tasks, {} nodes ({})\n\n",
        step.nodes.len(),
        drover_model::hostlist::Hostlist::from_iter(&names).ranged()
    );
    for (i, n) in step.nodes.iter().enumerate() {
        let tasks: String = n.task_ids.iter().map(|t| format!("{t} ")).collect();
        out.push_str(&format!("\tNode {i} ({}), {} task(s): {tasks}\n", n.node, n.task_ids.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_as_slurm_prints_it() {
        let node = |n: &str, t: u32| v1::StepNode { node: n.into(), task_ids: vec![t], ..Default::default() };
        let step = v1::StepInfo { nodes: vec![node("node1", 0), node("node2", 1)], ..Default::default() };
        assert_eq!(
            layout_text(&step),
            "Job step layout:\n\t2 tasks, 2 nodes (node[1-2])\n\n\tNode 0 (node1), 1 task(s): 0 \n\tNode 1 (node2), 1 task(s): 1 \n"
        );
    }
}
