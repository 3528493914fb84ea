//! [`Recovery`] on its own: a fixture plays the connection (one stream of
//! data, a packet record per packet, losses and acknowledgements as a test
//! scripts them), and the record stream each loss history leaves is
//! pinned as a snapshot, as s2n-quic pins its recovery manager's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use wire::time::{Duration, Instant};
use wire::transport_params::TransportParameters;
use wire::{Dir, Side};

use super::*;
use crate::congestion::{CongestionAlgorithm, DeliveryRateEstimator};
use crate::events::{RecoveryOutcome, RecoveryRecord};
use crate::policy::{QuicPolicy, SendingHooks};
use crate::rng::RngSeed;
use crate::streams::StreamsConfig;

/// A policy that sends `R` replicas of every lost packet at once
/// (`fixed:R`'s decision, without its crate).
#[derive(Debug)]
struct Replicas(usize);

impl RecoveryPolicy for Replicas {
    fn name(&self) -> String {
        format!("replicas:{}", self.0)
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, _lost: &LostData) -> Decision {
        Decision::Retransmit {
            send_at: vec![cx.now; self.0],
            opportunistic: false,
        }
    }
}

/// A policy that schedules one replica of every lost packet `delay` after
/// the loss and, whenever the sender is application-limited, asks to
/// reinject the last item it saw; it counts the reinjections the
/// transport refused.
#[derive(Debug)]
struct Reinjector {
    delay: Duration,
    last: Option<ItemId>,
    refused: Arc<Mutex<Vec<ItemId>>>,
}

impl RecoveryPolicy for Reinjector {
    fn name(&self) -> String {
        "reinjector".into()
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        self.last = Some(lost.item);
        Decision::single(cx.now + self.delay)
    }

    fn sending_hooks(&mut self) -> Option<&mut dyn SendingHooks> {
        Some(self)
    }
}

impl SendingHooks for Reinjector {
    fn on_app_limited(&mut self, _cx: &mut PolicyContext<'_>) -> Option<ItemId> {
        self.last
    }

    fn on_reinjection_refused(&mut self, _cx: &mut PolicyContext<'_>, item: ItemId) {
        if let Ok(mut r) = self.refused.lock() {
            r.push(item);
        }
    }
}

/// Writes what recovery tells the subscribers, one line per event.
struct Log(Arc<Mutex<Vec<String>>>);

impl Subscriber for Log {
    fn replica_scheduled(
        &mut self,
        now: Instant,
        item: ItemId,
        round: u32,
        index: u16,
        _send_at: Instant,
    ) {
        self.push(format!(
            "{} ms: item {} round {round} replica {index} scheduled",
            now.as_nanos() / 1_000_000,
            item.0
        ));
    }

    fn recovery_ended(&mut self, now: Instant, r: &RecoveryRecord) {
        let how = match r.outcome {
            RecoveryOutcome::Delivered { round, needed, .. } => {
                format!("delivered n={round} needed={needed}")
            }
            RecoveryOutcome::Abandoned { reason, .. } => format!("abandoned {reason:?}"),
        };
        self.push(format!(
            "{} ms: item {} {how} k={}",
            now.as_nanos() / 1_000_000,
            r.item.0,
            r.retransmissions
        ));
    }
}

impl Log {
    fn push(&self, line: String) {
        if let Ok(mut l) = self.0.lock() {
            l.push(line);
        }
    }
}

/// The connection's part: one stream of data being sent, the packets in
/// flight, the statistics and the subscribers.
struct Fixture {
    recovery: Recovery,
    streams: Streams,
    stats: ConnectionStats,
    subscribers: Vec<Box<dyn Subscriber>>,
    rng: StackRng,
    /// The path the policy sees: NewReno at its initial window, 30 ms.
    cc: Box<dyn Controller>,
    rtt: RttEstimator,
    log: Arc<Mutex<Vec<String>>>,
    now: Instant,
    next_pn: u64,
    in_flight: BTreeMap<u64, SentPacket>,
}

impl Fixture {
    /// `bytes` of stream data queued on one stream under `policy`.
    fn new(policy: Box<dyn RecoveryPolicy>, bytes: usize) -> Self {
        let mut peer = TransportParameters::default();
        StreamsConfig::default().apply_to(&mut peer);
        let mut streams = Streams::new(Side::Server, StreamsConfig::default());
        streams.set_peer_params(&peer);
        let id = streams.open(Dir::Uni).expect("a stream");
        let written = streams.write(id, &vec![7u8; bytes]).expect("writable");
        assert_eq!(written, bytes);
        let log = Arc::new(Mutex::new(Vec::new()));
        Fixture {
            recovery: Recovery::new(policy),
            streams,
            stats: ConnectionStats::default(),
            subscribers: vec![Box::new(Log(log.clone()))],
            rng: StackRng::new(RngSeed::Fixed(1)),
            cc: CongestionAlgorithm::NewReno.build_seeded(Instant::from_millis(0), 1200, 1),
            rtt: RttEstimator::new(Duration::from_millis(30)),
            log,
            now: Instant::from_millis(0),
            next_pn: 0,
            in_flight: BTreeMap::new(),
        }
    }

    fn cx(&mut self) -> (&mut Recovery, RecoveryContext<'_>) {
        (
            &mut self.recovery,
            RecoveryContext {
                now: self.now,
                path: PathInputs {
                    cc: self.cc.as_ref(),
                    rtt: &self.rtt,
                    bytes_in_flight: 0,
                    mtu: 1200,
                },
                streams: &mut self.streams,
                stats: &mut self.stats,
                subscribers: &mut self.subscribers,
                rng: &mut self.rng,
            },
        )
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
    }

    fn record(&self) -> SentPacket {
        SentPacket {
            time_sent: self.now,
            size: 1200,
            ack_eliciting: true,
            in_flight: true,
            largest_acked: None,
            stream_chunks: Vec::new(),
            datagrams: Vec::new(),
            retransmits: Vec::new(),
            rate: DeliveryRateEstimator::default().on_packet_sent(self.now, 0),
            replica: None,
            reinjection: false,
            new_data: false,
            early_copy: false,
            tag: None,
            ecn_marked: false,
        }
    }

    /// Track a packet as the connection does once it left.
    fn sent(&mut self, mut record: SentPacket) -> u64 {
        let pn = self.next_pn;
        self.next_pn += 1;
        let view = SentView {
            pn,
            size: record.size,
            replica: record.replica,
            carries_new_data: record.new_data,
        };
        let (recovery, mut cx) = self.cx();
        record.tag = recovery.on_packet_sent(&mut cx, &view);
        self.in_flight.insert(pn, record);
        pn
    }

    /// A packet of new stream data (1000 bytes).
    fn send_new(&mut self) -> u64 {
        let mut record = self.record();
        let chunk = self.streams.poll_chunk(1000).expect("data left to send");
        record.stream_chunks.push(chunk);
        record.new_data = true;
        self.sent(record)
    }

    /// Every resend recovery plans now, each in a packet of its own.
    fn send_resends(&mut self) -> Vec<u64> {
        let mut pns = Vec::new();
        loop {
            let window = SendWindow {
                may_elicit: true,
                pacing_ok: true,
                probing: false,
                app_limited: false,
                room: 1200,
            };
            let (recovery, mut cx) = self.cx();
            let Some(resend) = recovery.plan_resend(&mut cx, window) else {
                return pns;
            };
            let mut record = self.record();
            let mut buf = Vec::new();
            let (recovery, mut cx) = self.cx();
            if !recovery.write_resend(&mut cx, resend, &mut buf, 1200, true, &mut record) {
                return pns;
            }
            pns.push(self.sent(record));
        }
    }

    /// A PTO probe's copy of the oldest data in flight.
    fn send_probe_copy(&mut self) -> u64 {
        let candidates: Vec<Vec<StreamChunk>> = self
            .in_flight
            .values()
            .filter(|p| !p.stream_chunks.is_empty())
            .map(|p| p.stream_chunks.clone())
            .collect();
        let mut record = self.record();
        let mut buf = Vec::new();
        let (recovery, mut cx) = self.cx();
        assert!(recovery.write_probe_copy(&mut cx, &candidates, &mut buf, 1200, &mut record));
        self.sent(record)
    }

    /// One detection pass declares `pns` lost.
    fn lose(&mut self, pns: &[u64]) {
        let packets: Vec<(u64, SentPacket)> = pns
            .iter()
            .map(|pn| (*pn, self.in_flight.remove(pn).expect("in flight")))
            .collect();
        let (recovery, mut cx) = self.cx();
        recovery.on_losses_detected(&mut cx, &packets);
        for (pn, p) in packets {
            recovery.on_data_packet_lost(&mut cx, pn, p);
        }
        recovery.publish(&mut cx, true);
    }

    /// One ACK frame acknowledges `pns` (in flight, or declared lost).
    fn ack(&mut self, pns: &[u64]) {
        let ranges: Vec<std::ops::RangeInclusive<u64>> = pns.iter().map(|pn| *pn..=*pn).collect();
        let horizon = Instant::from_millis(0);
        let (recovery, mut cx) = self.cx();
        recovery.detect_spurious(&mut cx, &ranges, horizon);
        for pn in pns {
            let Some(p) = self.in_flight.remove(pn) else {
                continue;
            };
            for c in &p.stream_chunks {
                self.streams.on_chunk_acked(c);
            }
            let (recovery, mut cx) = self.cx();
            recovery.on_packet_acked(&mut cx, *pn, &p);
        }
        let (recovery, mut cx) = self.cx();
        recovery.publish(&mut cx, true);
    }

    /// The record stream so far, with the counters recovery keeps.
    fn transcript(&self) -> String {
        let mut lines = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        let s = &self.stats;
        lines.push(format!(
            "replicas {} extra {} probe copies {} head copies {} spurious {}",
            s.replicas, s.extra_replicas, s.probe_copies, s.head_copies, s.spurious_retransmissions
        ));
        lines.join("\n")
    }
}

#[test]
fn a_loss_recovered_in_the_first_round() {
    let mut f = Fixture::new(Box::new(QuicPolicy), 3000);
    let a = f.send_new();
    let b = f.send_new();
    f.advance(40);
    f.lose(&[a]);
    let r = f.send_resends();
    assert_eq!(r.len(), 1);
    f.advance(30);
    f.ack(&[b, r[0]]);
    insta::assert_snapshot!(f.transcript(), @r"
    40 ms: item 0 round 1 replica 0 scheduled
    70 ms: item 0 delivered n=1 needed=1 k=1
    replicas 1 extra 0 probe copies 0 head copies 0 spurious 0
    ");
}

#[test]
fn a_lost_replica_starts_the_next_round() {
    let mut f = Fixture::new(Box::new(QuicPolicy), 3000);
    let a = f.send_new();
    f.advance(40);
    f.lose(&[a]);
    let r1 = f.send_resends();
    f.advance(40);
    f.lose(&r1);
    let r2 = f.send_resends();
    f.advance(30);
    f.ack(&r2);
    insta::assert_snapshot!(f.transcript(), @r"
    40 ms: item 0 round 1 replica 0 scheduled
    80 ms: item 0 round 2 replica 0 scheduled
    110 ms: item 0 delivered n=2 needed=2 k=2
    replicas 2 extra 0 probe copies 0 head copies 0 spurious 0
    ");
}

/// Three replicas in one round: the first two lost do not end the round;
/// the third delivers, having cost all three.
#[test]
fn a_round_of_replicas_ends_with_its_last() {
    let mut f = Fixture::new(Box::new(Replicas(3)), 3000);
    let a = f.send_new();
    f.advance(40);
    f.lose(&[a]);
    let r = f.send_resends();
    assert_eq!(r.len(), 3);
    f.advance(40);
    f.lose(&r[..2]);
    assert!(f.send_resends().is_empty(), "the round goes on");
    f.ack(&r[2..]);
    insta::assert_snapshot!(f.transcript(), @r"
    40 ms: item 0 round 1 replica 0 scheduled
    40 ms: item 0 round 1 replica 1 scheduled
    40 ms: item 0 round 1 replica 2 scheduled
    80 ms: item 0 delivered n=1 needed=3 k=3
    replicas 3 extra 2 probe copies 0 head copies 0 spurious 0
    ");
}

/// The original arrives after its loss was declared: delivered in round
/// 0, and the queued replica is never sent.
#[test]
fn a_spurious_loss_is_delivered_by_the_original() {
    let mut f = Fixture::new(Box::new(QuicPolicy), 3000);
    let a = f.send_new();
    f.advance(40);
    f.lose(&[a]);
    f.advance(5);
    f.ack(&[a]);
    assert!(f.send_resends().is_empty());
    insta::assert_snapshot!(f.transcript(), @r"
    40 ms: item 0 round 1 replica 0 scheduled
    45 ms: item 0 delivered n=0 needed=0 k=0
    replicas 0 extra 0 probe copies 0 head copies 0 spurious 1
    ");
}

/// A probe's copy got through before the original's loss was declared:
/// the item ends delivered in round 1 at once, and its retransmissions
/// count the copy (k = 1, where the copy used to go uncounted).
#[test]
fn an_acknowledged_probe_copy_counts_in_k() {
    let mut f = Fixture::new(Box::new(QuicPolicy), 3000);
    let a = f.send_new();
    f.advance(100);
    let copy = f.send_probe_copy();
    f.advance(30);
    f.ack(&[copy]);
    f.lose(&[a]);
    assert!(f.send_resends().is_empty(), "nothing left to resend");
    insta::assert_snapshot!(f.transcript(), @r"
    130 ms: item 0 delivered n=1 needed=1 k=1
    replicas 1 extra 0 probe copies 1 head copies 0 spurious 0
    ");
}

/// A probe's copy still in flight when the loss is declared: round 1
/// sends a replica, and when it delivers, k counts both resends.
#[test]
fn a_probe_copy_in_flight_counts_in_k() {
    let mut f = Fixture::new(Box::new(QuicPolicy), 3000);
    let a = f.send_new();
    f.advance(100);
    let copy = f.send_probe_copy();
    f.advance(10);
    f.lose(&[a]);
    let r = f.send_resends();
    f.advance(40);
    f.lose(&[copy]);
    f.ack(&r);
    insta::assert_snapshot!(f.transcript(), @r"
    110 ms: item 0 round 1 replica 0 scheduled
    150 ms: item 0 delivered n=1 needed=2 k=2
    replicas 2 extra 0 probe copies 1 head copies 0 spurious 0
    ");
}

/// The connection closes with data still being recovered: every item
/// leaves abandoned, once.
#[test]
fn closing_abandons_every_item_once() {
    let mut f = Fixture::new(Box::new(QuicPolicy), 3000);
    let a = f.send_new();
    let b = f.send_new();
    f.advance(40);
    f.lose(&[a, b]);
    let (recovery, mut cx) = f.cx();
    recovery.abandon_all(&mut cx);
    recovery.abandon_all(&mut cx);
    insta::assert_snapshot!(f.transcript(), @r"
    40 ms: item 0 round 1 replica 0 scheduled
    40 ms: item 1 round 1 replica 0 scheduled
    40 ms: item 0 abandoned ConnectionClosed k=0
    40 ms: item 1 abandoned ConnectionClosed k=0
    replicas 0 extra 0 probe copies 0 head copies 0 spurious 0
    ");
}

#[test]
fn a_refused_reinjection_is_reported_to_the_policy() {
    let refused = Arc::new(Mutex::new(Vec::new()));
    let policy = Reinjector {
        delay: Duration::from_millis(100),
        last: None,
        refused: refused.clone(),
    };
    let mut f = Fixture::new(Box::new(policy), 3000);
    let a = f.send_new();
    f.advance(40);
    f.lose(&[a]);
    let idle = SendWindow {
        may_elicit: true,
        pacing_ok: true,
        probing: false,
        app_limited: true,
        room: 1200,
    };
    // The round's replica waits (due at 140 ms): a reinjection now is
    // refused, and nothing goes out.
    let (recovery, mut cx) = f.cx();
    assert!(recovery.plan_resend(&mut cx, idle).is_none());
    assert_eq!(*refused.lock().unwrap(), vec![ItemId(0)]);
    // Once that replica has gone, the reinjection is accepted and sent at
    // once.
    f.advance(100);
    assert_eq!(f.send_resends().len(), 1);
    let (recovery, mut cx) = f.cx();
    assert!(matches!(
        recovery.plan_resend(&mut cx, idle),
        Some(Resend::Replica(_))
    ));
    assert_eq!(refused.lock().unwrap().len(), 1, "accepted: not reported");
}
