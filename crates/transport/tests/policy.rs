//! The recovery-policy seam: replicas are real packets, scheduled when the
//! policy says, each reported back as acknowledged or lost; rounds advance
//! only when every replica of a round is lost.

use std::sync::{Arc, Mutex};

use rand::RngCore;
use transport::policy::{
    DataKind, Decision, LostData, PacketFate, PathView, PolicyFactory, RecoveryPolicy, SentView,
};
use transport::test_pair::{content, transport_with, Pair};
use transport::TransportConfig;
use wire::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Log {
    decisions: Vec<(u32, Instant)>,
    decided_at: std::collections::BTreeMap<(u64, u32), Instant>,
    replicas_sent: Vec<(u64, u32, u16, Instant)>,
    replicas_acked: u64,
    replicas_lost: u64,
}

/// Sends `r` replicas, spaced by `gap`, each round.
#[derive(Debug, Clone)]
struct Spread {
    r: usize,
    gap: Duration,
    log: Arc<Mutex<Log>>,
}

impl RecoveryPolicy for Spread {
    fn name(&self) -> String {
        format!("spread:{}", self.r)
    }

    fn on_data_lost(
        &mut self,
        now: Instant,
        lost: &LostData,
        _path: &PathView,
        _rng: &mut dyn RngCore,
    ) -> Decision {
        let mut log = self.log.lock().unwrap();
        log.decisions.push((lost.round, now));
        log.decided_at.insert((lost.item.0, lost.round), now);
        Decision::Retransmit {
            send_at: (0..self.r).map(|i| now + self.gap * i as u32).collect(),
            opportunistic: true,
        }
    }

    fn on_packet_sent(&mut self, now: Instant, sent: &SentView) -> u64 {
        if let Some(r) = sent.replica {
            self.log
                .lock()
                .unwrap()
                .replicas_sent
                .push((r.item.0, r.round, r.index, now));
        }
        sent.pn
    }

    fn on_packet_acked(&mut self, _now: Instant, fate: &PacketFate, _path: &PathView) {
        assert_eq!(fate.tag, fate.pn, "tag must come back unchanged");
        if fate.replica.is_some() {
            self.log.lock().unwrap().replicas_acked += 1;
        }
    }

    fn on_packet_lost(&mut self, _now: Instant, fate: &PacketFate, _path: &PathView) {
        if fate.replica.is_some() {
            self.log.lock().unwrap().replicas_lost += 1;
        }
    }
}

impl PolicyFactory for Spread {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(self.clone())
    }
    fn name(&self) -> String {
        format!("spread:{}", self.r)
    }
}

#[test]
fn replicas_are_scheduled_sent_and_reported() {
    let log = Arc::new(Mutex::new(Log::default()));
    let policy = Spread {
        r: 3,
        gap: Duration::from_millis(2),
        log: log.clone(),
    };
    let mut pair = Pair::new(transport_with(Arc::new(policy)), TransportConfig::default())
        .with_random_loss(0.03);
    let data = content(600_000, 11);
    let got = pair.download(&data, Duration::from_secs(60));
    assert!(got == data, "corrupted transfer");
    let stats = pair.server().stats();
    let log = log.lock().unwrap();
    assert!(!log.decisions.is_empty(), "no loss was recovered");
    // Every decision asked for 3 replicas; each went out as its own packet.
    assert_eq!(stats.replicas, log.replicas_sent.len() as u64);
    assert!(stats.replicas <= 3 * log.decisions.len() as u64);
    assert!(stats.extra_replicas > 0);
    // Replica i of a round never leaves before the time the policy chose
    // for it: i*2 ms after the decision (pacing may delay it further).
    for &(item, round, index, sent) in &log.replicas_sent {
        let decided = log.decided_at[&(item, round)];
        assert!(
            sent >= decided + Duration::from_millis(2) * u32::from(index),
            "replica {index} of item {item} round {round} left early"
        );
    }
    // The fate of every replica is reported, except the last few in flight.
    let reported = log.replicas_acked + log.replicas_lost;
    assert!(
        reported + 10 >= stats.replicas,
        "{reported} fates for {} replicas",
        stats.replicas
    );
    assert!(stats.n_max >= 1);
}

#[test]
fn rounds_advance_only_when_all_replicas_are_lost() {
    let log = Arc::new(Mutex::new(Log::default()));
    let policy = Spread {
        r: 2,
        gap: Duration::from_millis(1),
        log: log.clone(),
    };
    let mut pair = Pair::new(transport_with(Arc::new(policy)), TransportConfig::default())
        .with_random_loss(0.2);
    let data = content(200_000, 12);
    let got = pair.download(&data, Duration::from_secs(120));
    assert!(got == data);
    let log = log.lock().unwrap();
    let rounds_beyond_first = log.decisions.iter().filter(|(r, _)| *r > 1).count() as u64;
    // A later round needs both replicas of the previous one lost.
    assert!(rounds_beyond_first * 2 <= log.replicas_lost);
}

/// Retransmits lost datagrams for up to `rounds` rounds, then drops them
/// (the shape of RCP's retransmit-or-drop decision).
#[derive(Debug, Clone)]
struct DatagramRetry {
    rounds: u32,
}

impl RecoveryPolicy for DatagramRetry {
    fn name(&self) -> String {
        "datagram-retry".into()
    }
    fn on_data_lost(
        &mut self,
        now: Instant,
        lost: &LostData,
        _path: &PathView,
        _rng: &mut dyn RngCore,
    ) -> Decision {
        if lost.kind == DataKind::Datagram && lost.round > self.rounds {
            Decision::Drop
        } else {
            Decision::single(now)
        }
    }
}

impl PolicyFactory for DatagramRetry {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(self.clone())
    }
    fn name(&self) -> String {
        "datagram-retry".into()
    }
}

/// Server sends `n` datagrams through 20 % loss (server to client only);
/// returns (received distinct payloads, server stats).
fn send_datagrams(policy: Arc<dyn PolicyFactory>, n: u32) -> (usize, transport::ConnectionStats) {
    let mut pair = Pair::new(transport_with(policy), TransportConfig::default());
    pair.connect();
    pair.drop = Some(Box::new(|_, to_server, _, rng| {
        use rand::Rng;
        !to_server && rng.gen::<f64>() < 0.2
    }));
    let mut got = std::collections::BTreeSet::new();
    let mut next = 0u32;
    pair.drive_until(Duration::from_secs(30), |p| {
        while next < n && next < 1 + (p.now.as_nanos() / 5_000_000) as u32 {
            p.server()
                .send_datagram(next.to_be_bytes().to_vec())
                .unwrap();
            next += 1;
        }
        while let Some(d) = p.client().recv_datagram() {
            got.insert(d);
        }
        false
    });
    let stats = pair.server().stats();
    (got.len(), stats)
}

#[test]
fn lost_datagrams_are_dropped_by_quic_and_retransmitted_on_request() {
    let (plain, s) = send_datagrams(Arc::new(transport::policy::QuicPolicy), 300);
    assert!(
        plain < 290,
        "20% loss but {plain} of 300 arrived without retransmission"
    );
    assert!(s.datagrams_dropped > 0);
    assert_eq!(s.replicas, 0);
    let (retried, s) = send_datagrams(Arc::new(DatagramRetry { rounds: 4 }), 300);
    assert!(
        retried >= 299,
        "retransmitted datagrams should nearly all arrive: {retried}"
    );
    assert!(s.replicas > 0);
}

/// Block FEC with ARQ fallback (the `fec:K` baseline's transport side).
#[derive(Debug, Clone)]
struct Fec(u16);

impl RecoveryPolicy for Fec {
    fn name(&self) -> String {
        format!("fec:{}", self.0)
    }
    fn on_data_lost(
        &mut self,
        now: Instant,
        _lost: &LostData,
        _path: &PathView,
        _rng: &mut dyn RngCore,
    ) -> Decision {
        Decision::single(now)
    }
    fn fec_block_size(&self) -> Option<u16> {
        Some(self.0)
    }
}

impl PolicyFactory for Fec {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(self.clone())
    }
    fn name(&self) -> String {
        format!("fec:{}", self.0)
    }
}

#[test]
fn fec_repairs_single_losses_at_an_artq_receiver() {
    let mut pair = Pair::new(transport_with(Arc::new(Fec(9))), TransportConfig::default())
        .with_random_loss(0.02);
    let data = content(2_000_000, 21);
    let got = pair.download(&data, Duration::from_secs(60));
    assert!(got == data, "corrupted transfer");
    let server = pair.server().stats();
    let client = pair.client().stats();
    // One repair per 9 data packets.
    let expected = server.data_packets / 9;
    assert!(
        server.fec_repairs + 1 >= expected && server.fec_repairs <= expected + 1,
        "{} repairs for {} data packets",
        server.fec_repairs,
        server.data_packets
    );
    assert!(client.fec_recovered > 0, "no packet rebuilt at 2% loss");
    // Rebuilt packets are acknowledged, so ARQ retransmits fewer than were lost.
    assert!(server.replicas < server.lost_packets);
}

#[test]
fn fec_is_never_sent_to_a_receiver_that_does_not_decode_it() {
    let client = TransportConfig {
        accept_fec: false,
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(transport_with(Arc::new(Fec(9))), client).with_random_loss(0.02);
    let data = content(500_000, 22);
    let got = pair.download(&data, Duration::from_secs(60));
    assert!(got == data);
    assert_eq!(pair.server().stats().fec_repairs, 0);
}

/// Regression: a packet declared lost and then acknowledged (here: rebuilt
/// by FEC at the receiver) must count as acknowledged in the stream layer
/// even after its item and queued replicas are gone; otherwise the send
/// buffer never frees and the transfer stalls once it is full.
#[test]
fn late_acknowledged_losses_free_the_send_buffer() {
    let mut server = transport_with(Arc::new(Fec(9)));
    server.streams.send_buffer = 256 * 1024;
    let mut pair = Pair::new(server, TransportConfig::default()).with_random_loss(0.03);
    let data = content(3_000_000, 23);
    let got = pair.download(&data, Duration::from_secs(120));
    assert!(got == data);
    assert!(
        pair.server().stats().spurious_retransmissions > 0,
        "the scenario must produce late acknowledgements"
    );
}
