//! A server endpoint past a real handshake, fed arbitrary frames in
//! correctly protected 1-RTT packets from its client.
//! Body: `transport::fuzzing::server_frames`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    transport::fuzzing::server_frames(data);
});
