//! A recording wrapper around a scheme's policy factory, for the
//! end-to-end tests: it checks every decision against the policy seam's
//! invariants and counts rounds and replicas. (The client/server pair the
//! tests drive is `transport::test_pair`.)
use std::sync::{Arc, Mutex};

use transport::policy::{
    DataKind, Decision, LostData, PacketFate, PacketTag, PolicyContext, PolicyFactory,
    RecoveryPolicy, SentView,
};

/// What a [`Recorded`] policy saw and decided.
#[derive(Debug, Default)]
pub struct Record {
    /// `on_data_lost` calls: retransmission rounds started.
    pub rounds: u64,
    /// Replicas asked for, all rounds.
    pub replicas_asked: u64,
    /// Replica packets the transport reported as sent.
    pub replicas_sent: u64,
    /// Decisions that broke the seam's invariants (described).
    pub violations: Vec<String>,
}

/// Wraps a scheme's factory: every policy it builds delegates to the real
/// one and records its decisions.
#[derive(Debug)]
pub struct Recorded {
    /// The scheme under test.
    pub inner: Arc<dyn PolicyFactory>,
    /// Shared with the test, which reads it after the run.
    pub record: Arc<Mutex<Record>>,
}

#[derive(Debug)]
struct RecordedPolicy {
    inner: Box<dyn RecoveryPolicy>,
    record: Arc<Mutex<Record>>,
}

impl PolicyFactory for Recorded {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(RecordedPolicy {
            inner: self.inner.build(),
            record: self.record.clone(),
        })
    }

    fn name(&self) -> String {
        self.inner.name()
    }
}

impl RecoveryPolicy for RecordedPolicy {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        let now = cx.now;
        let path = *cx.path;
        let d = self.inner.on_data_lost(cx, lost);
        let mut r = self.record.lock().expect("record lock");
        r.rounds += 1;
        if let Decision::Retransmit { send_at, .. } = &d {
            r.replicas_asked += send_at.len() as u64;
            if send_at.is_empty() || send_at.windows(2).any(|w| w[0] > w[1]) {
                r.violations.push(format!("bad send times {send_at:?}"));
            }
            if let Some(t) = send_at.iter().find(|t| **t < now || **t > now + path.srtt) {
                r.violations
                    .push(format!("{t:?} outside [{now:?}, +{:?}]", path.srtt));
            }
        } else if lost.kind == DataKind::Stream {
            r.violations.push("dropped stream data".into());
        }
        d
    }

    fn on_packet_sent(&mut self, cx: &mut PolicyContext<'_>, sent: &SentView) -> Option<PacketTag> {
        if sent.replica.is_some() {
            self.record.lock().expect("record lock").replicas_sent += 1;
        }
        self.inner.on_packet_sent(cx, sent)
    }

    fn on_packet_acked(&mut self, cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        self.inner.on_packet_acked(cx, fate);
    }

    fn on_packet_lost(&mut self, cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        self.inner.on_packet_lost(cx, fate);
    }
}
