//! Arbitrary datagrams through the packet header decoder, then the frame
//! decoder over each packet's remaining bytes. Body: `wire::fuzzing::wire_packet`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wire::fuzzing::wire_packet(data);
});
