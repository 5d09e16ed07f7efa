//! Format strings: `squeue -o`/`sinfo -o`, `squeue -O` and `-S`, `sacct --format`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let _ = drover_cli::format::parse(&s);
    drover_cli::fuzzing::squeue_format(&s);
    drover_cli::fuzzing::sacct_format(&s);
});
