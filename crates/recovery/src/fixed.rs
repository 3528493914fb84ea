//! `fixed:R`: a fixed redundancy level in every retransmission round.
//!
//! ART journal §5.2 ("a naive approach ... a fixed redundancy level for all
//! rounds, i.e. R_n = R") and §7.1 ("QUIC (R = 1) refers to the QUIC that
//! adopts a fixed redundancy level"). The R replicas of a round are sent back
//! to back, subject to congestion control and pacing like any
//! retransmission (no opportunism: that belongs to ART, journal §6.4).
//! `fixed:1` behaves exactly like plain QUIC. Lost DATAGRAM-only data is
//! given up, as plain QUIC does (RFC 9221: unreliable by nature).

use transport::policy::{
    DataKind, Decision, LostData, PolicyContext, RecoveryPolicy, MAX_REPLICAS,
};

use crate::error::SchemeError;

/// R replicas per round, all due at once, not opportunistic.
///
/// It is both the policy and its factory (the policy has no state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedPolicy {
    r: u32,
}

impl FixedPolicy {
    /// A fixed redundancy level `r`, which must be in `1..=MAX_REPLICAS`
    /// (the transport's hard cap on replicas per round).
    pub fn new(r: u32) -> Result<Self, SchemeError> {
        if r == 0 || r as usize > MAX_REPLICAS {
            return Err(SchemeError::InvalidConfig {
                scheme: format!("fixed:{r}"),
                reason: format!("R must be an integer in 1..={MAX_REPLICAS}"),
            });
        }
        Ok(FixedPolicy { r })
    }

    /// The redundancy level R.
    pub fn level(&self) -> u32 {
        self.r
    }
}

impl RecoveryPolicy for FixedPolicy {
    fn name(&self) -> String {
        format!("fixed:{}", self.r)
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        let now = cx.now;
        if lost.kind == DataKind::Datagram {
            return Decision::Drop;
        }
        Decision::Retransmit {
            send_at: vec![now; self.r as usize],
            opportunistic: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use transport::policy::ItemId;
    use transport::policy::PolicyFactory;
    use transport::policy::{with_context, PathView};
    use wire::time::Instant;

    fn lost(round: u32) -> LostData {
        LostData::new(ItemId(1), round, Instant::ZERO, Instant::ZERO, 1000)
    }

    #[test]
    fn sends_r_back_to_back_in_every_round() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let now = Instant::from_millis(5);
        for r in [1, 3, 32] {
            let mut p = FixedPolicy::new(r).unwrap().build();
            for round in [1, 2, 7, u32::MAX] {
                let d = with_context(now, &PathView::default(), &mut rng, |cx| {
                    p.on_data_lost(cx, &lost(round))
                });
                assert_eq!(
                    d,
                    Decision::Retransmit {
                        send_at: vec![now; r as usize],
                        opportunistic: false
                    }
                );
            }
            assert_eq!(p.name(), format!("fixed:{r}"));
        }
    }

    #[test]
    fn datagrams_are_given_up() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut p = FixedPolicy::new(3).unwrap().build();
        let l = lost(1).with_kind(DataKind::Datagram);
        assert_eq!(
            with_context(Instant::ZERO, &PathView::default(), &mut rng, |cx| p
                .on_data_lost(cx, &l)),
            Decision::Drop
        );
    }

    #[test]
    fn rejects_out_of_range_levels() {
        assert!(FixedPolicy::new(0).is_err());
        assert!(FixedPolicy::new(MAX_REPLICAS as u32 + 1).is_err());
        assert_eq!(FixedPolicy::new(2).unwrap().level(), 2);
    }
}
