//! Journal replay, past the framing: any bytes as a journal record (decoded and applied to a
//! state) and as a whole snapshot state, as the controller decodes them at start.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    drover_controller::fuzzing::replay(data);
});
