//! Arbitrary bytes as an origin's HTTP/1.1 response to the edge: the
//! response decoder (heads, interim responses, every body framing) whole and
//! split into reads under backpressure, and the response field rules.
//! Body: `apps::edge::http1::fuzzing::origin_response`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    apps::edge::http1::fuzzing::origin_response(data);
});
