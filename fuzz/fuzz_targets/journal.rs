//! Journal replay: any bytes as the newest segment (strict and salvage reads), as a snapshot
//! and segment on disk opened by the controller's journal, and as an older-format file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let p = Path::new("journal.0");
    for salvage in [false, true] {
        let seg = drover_journal::scan::segment(p, data, 0, salvage);
        assert!(seg.good_end as usize <= data.len());
        if let Some(t) = seg.torn {
            assert_eq!(t.offset + t.bytes, data.len() as u64, "a torn tail runs to the end");
        }
    }
    let _ = drover_journal::scan::legacy(data, 0);
    // Half as the snapshot, half as the segment, opened for real.
    let dir = tempfile::tempdir().expect("a temp dir");
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    std::fs::write(dir.path().join("snapshot"), &data[..cut]).expect("write");
    std::fs::write(dir.path().join("journal.0"), &data[cut..]).expect("write");
    let _ = drover_journal::inspect(dir.path());
    let _ = drover_journal::Journal::open(dir.path());
});
