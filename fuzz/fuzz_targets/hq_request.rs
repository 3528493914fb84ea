//! Arbitrary bytes as an hq-interop request stream: the request parser, the
//! path decoder and the directory resolver of `artq serve`.
//! Body: `apps::fuzzing::hq_request`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    apps::fuzzing::hq_request(data);
});
