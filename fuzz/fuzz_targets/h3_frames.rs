//! Arbitrary bytes through the HTTP/3 frame readers (request, response,
//! control and QPACK streams) and the QPACK decoder; what decodes must
//! re-encode to itself. Body: `apps::h3::fuzzing::frames_and_qpack`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    apps::h3::fuzzing::frames_and_qpack(data);
});
