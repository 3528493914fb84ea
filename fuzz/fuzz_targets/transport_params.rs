//! Arbitrary transport parameter extensions, decoded as either side's; what
//! decodes must round-trip. Body: `wire::fuzzing::transport_params`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wire::fuzzing::transport_params(data);
});
