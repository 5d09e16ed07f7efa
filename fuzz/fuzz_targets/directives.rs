//! A batch script's `#SBATCH` directives, then the options they make, as sbatch reads them.
#![no_main]
use clap::Parser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let script = String::from_utf8_lossy(data);
    if let Ok(words) = drover_cli::jobopts::directives(&script, "#SBATCH") {
        let argv = std::iter::once("sbatch".to_string()).chain(words);
        if let Ok(a) = drover_cli::jobopts::JobArgs::try_parse_from(argv) {
            let _ = a.validate(true);
        }
    }
});
