//! Arbitrary datagrams into a server `Endpoint` in virtual time.
//! Body: `transport::fuzzing::server_datagrams`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    transport::fuzzing::server_datagrams(data);
});
