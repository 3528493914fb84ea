//! A client endpoint fed arbitrary answers to its first Initial, or
//! arbitrary frames and datagrams after a real handshake.
//! Body: `transport::fuzzing::client_datagrams`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    transport::fuzzing::client_datagrams(data);
});
