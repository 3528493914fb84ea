//! Arbitrary packet payloads through the frame decoder; every decoded frame
//! must re-encode and decode to itself. Body: `wire::fuzzing::wire_frames`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wire::fuzzing::wire_frames(data);
});
