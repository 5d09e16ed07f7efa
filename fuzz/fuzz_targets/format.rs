//! `squeue -o`/`sinfo -o` format strings.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = drover_cli::format::parse(&String::from_utf8_lossy(data));
});
