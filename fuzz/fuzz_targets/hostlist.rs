//! Hostlists (`node[001-100,200]`, `a[1-2]b[3-4]`): parsed or refused; a parsed one names its
//! hosts and prints back.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(h) = drover_model::hostlist::Hostlist::parse(&text) {
        let names: Vec<String> = h.iter().take(10_000).collect();
        let _ = drover_model::hostlist::Hostlist::from_iter(&names).ranged();
    }
});
