//! ECN (RFC 9000 §13.4, issue 16): a sender asked to use ECN marks its
//! datagrams ECT(0), the receiver reports the counts in ACK_ECN frames,
//! and the sender validates them; on a path that clears the ECN bits the
//! validation fails and the sender stops marking. (The reaction to CE is
//! tested end to end in the simulator: `crates/lab/tests/sim.rs`.)

use transport::test_pair::{content, Pair};
use transport::TransportConfig;
use wire::time::Duration;

fn ecn_pair(bleach: bool) -> Pair {
    let ecn = TransportConfig {
        ecn: true,
        ..TransportConfig::default()
    };
    let mut pair = Pair::seeded(ecn.clone(), ecn, 5);
    pair.bleach_ecn = bleach;
    let data = content(1_000_000, 2);
    assert!(pair.download(&data, Duration::from_secs(30)) == data);
    pair
}

#[test]
fn marking_is_validated_on_a_clean_path() {
    let mut pair = ecn_pair(false);
    let s = pair.server().stats();
    assert!(!s.ecn_validation_failed);
    // Every datagram is marked; none was CE-marked on the way.
    assert_eq!(s.ecn_marked_sent, s.datagrams_sent);
    assert_eq!(s.ecn_ce_reported, 0);
}

#[test]
fn a_path_that_clears_ecn_fails_validation_and_marking_stops() {
    let mut pair = ecn_pair(true);
    let s = pair.server().stats();
    assert!(s.ecn_validation_failed);
    // Marking stopped at the first acknowledgement of marked packets.
    assert!(
        s.ecn_marked_sent * 10 < s.datagrams_sent,
        "{} of {} datagrams marked",
        s.ecn_marked_sent,
        s.datagrams_sent
    );
}

#[test]
fn without_ecn_nothing_is_marked() {
    let mut pair = Pair::seeded(TransportConfig::default(), TransportConfig::default(), 5);
    let data = content(200_000, 2);
    assert!(pair.download(&data, Duration::from_secs(30)) == data);
    assert_eq!(pair.server().stats().ecn_marked_sent, 0);
}
