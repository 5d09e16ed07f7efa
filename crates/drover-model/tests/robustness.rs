//! Parsers that read user input never panic, whatever they are given (a stable-toolchain
//! stand-in for the fuzzers, which need nightly).

use drover_model::{conf, duration, hostlist::Hostlist, job, memsize};
use proptest::prelude::*;

fn texty() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("[".to_string()),
            Just("]".to_string()),
            Just(",".to_string()),
            Just("-".to_string()),
            Just("=".to_string()),
            Just(" ".to_string()),
            Just("\n".to_string()),
            Just("\\".to_string()),
            Just("#".to_string()),
            Just("\"".to_string()),
            "[a-zA-Z]{1,6}",
            "[0-9]{1,8}",
        ],
        0..40,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn hostlists_never_panic(s in texty()) {
        if let Ok(h) = Hostlist::parse(&s) {
            // Whatever parses to ordinary names compresses to something that parses back to
            // the same hosts (Slurm keeps odd names from unbalanced brackets as they are).
            let ordinary = h.len() < 100_000 && h.iter().all(|n| !n.contains([' ', ',', '[', ']', '\n', '\\']));
            if ordinary {
                let again = Hostlist::parse(&h.ranged()).unwrap();
                prop_assert_eq!(again.names(), h.names());
            }
        }
    }

    #[test]
    fn slurm_conf_never_panics(s in texty()) {
        let _ = conf::parse_str("fuzz.conf", &s);
        let _ = conf::parse_str("fuzz.conf", &format!("NodeName={s}\nPartitionName=p Nodes={s}\n"));
    }

    #[test]
    fn small_parsers_never_panic(s in texty()) {
        let _ = duration::parse_time_limit(&s);
        let _ = memsize::parse_mb(&s);
        let _ = job::parse_dependency(&s);
        let _ = job::Constraint::parse(&s);
        let v = job::PatternVars { job_id: 1, array_job_id: 1, array_task_id: None, job_name: "n", user: "u", node: "x", node_index: 0, task: None, step: None };
        let _ = job::expand_pattern(&s, &v);
    }
}
