//! Option values users type: durations, dates, memory sizes, dependencies, arrays, GRES,
//! CPU binding, signals, multi-prog files, shell words, priorities.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let _ = drover_model::duration::parse_time_limit(&s);
    let _ = drover_cli::common::parse_time_spec(&s, 1_796_212_615);
    let _ = drover_model::memsize::parse_mb(&s);
    let _ = drover_model::memsize::tres_counts(&s);
    let _ = drover_model::job::parse_dependency(&s);
    let _ = drover_model::array::ArraySpec::parse(&s);
    let _ = drover_model::gres::parse_gres_request(&s);
    let _ = drover_model::gres::parse_gpus(&s);
    let _ = drover_model::gres::parse_node_gres(&s);
    let _ = drover_model::cpubind::CpuBind::parse(&s);
    let _ = drover_model::signal::SignalSpec::parse(&s);
    let _ = drover_model::signal::signal_number(&s);
    let _ = drover_model::multiprog::MultiProg::parse(&s, "multi.conf", Some(4));
    let _ = drover_cli::jobopts::shell_words(&s);
    let _ = drover_cli::jobopts::parse_priority(&s);
    let _ = drover_cli::jobopts::parse_nice(&s);
});
