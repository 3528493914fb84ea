//! Redundancy levels that grow with the retransmission round: `2n+1` and
//! `or3` (R = 2n − 1).
//!
//! ART journal §7.1: "OR3 ... the pioneering approach on redundant data
//! transmission ... adopts a variable redundancy level (R = 2n − 1), where n
//! denotes the n-th retransmission round", and "QUIC (R = 2n + 1) ... adopts a
//! variable redundancy level (R = 2n + 1)". Both are rules of the round alone:
//! they do not look at the network. Replicas go back to back, subject to
//! congestion control (not opportunistic), and R is capped at the
//! transport's [`MAX_REPLICAS`]. Lost DATAGRAM-only data is given up, as
//! plain QUIC does (RFC 9221).

use transport::policy::{
    DataKind, Decision, LostData, PolicyContext, RecoveryPolicy, MAX_REPLICAS,
};

/// Which function of the round n gives R_n.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundRule {
    /// R_n = 2n + 1 (ART journal §7.1, "QUIC (R = 2n + 1)"): 3, 5, 7, ...
    TwoNPlusOne,
    /// R_n = 2n − 1 (OR3, ART journal §7.1): 1, 3, 5, ...
    Or3,
}

impl RoundRule {
    /// R_n for round `n` (1-based; 0 is treated as 1), capped at
    /// [`MAX_REPLICAS`]. Never overflows, whatever `n`.
    pub fn level(self, n: u32) -> u32 {
        let n = u64::from(n.max(1));
        let r = match self {
            RoundRule::TwoNPlusOne => 2 * n + 1,
            RoundRule::Or3 => 2 * n - 1,
        };
        // Cap: `MAX_REPLICAS` is small, so the conversion cannot fail.
        r.min(MAX_REPLICAS as u64) as u32
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            RoundRule::TwoNPlusOne => "2n+1",
            RoundRule::Or3 => "or3",
        }
    }
}

/// A policy whose redundancy level is a function of the round; it is its own
/// factory (it has no state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundsPolicy {
    /// The rule giving R_n.
    pub rule: RoundRule,
}

impl RoundsPolicy {
    /// A policy following `rule`.
    pub fn new(rule: RoundRule) -> Self {
        RoundsPolicy { rule }
    }
}

impl RecoveryPolicy for RoundsPolicy {
    fn name(&self) -> String {
        self.rule.name().into()
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        let now = cx.now;
        if lost.kind == DataKind::Datagram {
            return Decision::Drop;
        }
        let r = self.rule.level(lost.round);
        Decision::Retransmit {
            send_at: vec![now; r as usize],
            opportunistic: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use transport::policy::ItemId;
    use transport::policy::PolicyFactory;
    use transport::policy::{with_context, PathView};
    use wire::time::Instant;

    fn lost(round: u32) -> LostData {
        LostData::new(ItemId(3), round, Instant::ZERO, Instant::ZERO, 1)
    }

    #[test]
    fn levels_per_round() {
        let two: Vec<u32> = (1..=5).map(|n| RoundRule::TwoNPlusOne.level(n)).collect();
        assert_eq!(two, [3, 5, 7, 9, 11]);
        let or3: Vec<u32> = (1..=5).map(|n| RoundRule::Or3.level(n)).collect();
        assert_eq!(or3, [1, 3, 5, 7, 9]);
        // Capped at the transport's limit, even for absurd rounds.
        assert_eq!(RoundRule::TwoNPlusOne.level(16), MAX_REPLICAS as u32);
        assert_eq!(RoundRule::Or3.level(17), MAX_REPLICAS as u32);
        assert_eq!(RoundRule::Or3.level(u32::MAX), MAX_REPLICAS as u32);
        // Round 0 never comes from the transport; it is read as round 1.
        assert_eq!(RoundRule::Or3.level(0), 1);
    }

    #[test]
    fn decisions_are_back_to_back_and_not_opportunistic() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let now = Instant::from_millis(9);
        let mut p = RoundsPolicy::new(RoundRule::Or3).build();
        let d = with_context(now, &PathView::default(), &mut rng, |cx| {
            p.on_data_lost(cx, &lost(2))
        });
        assert_eq!(
            d,
            Decision::Retransmit {
                send_at: vec![now; 3],
                opportunistic: false
            }
        );
        let mut p = RoundsPolicy::new(RoundRule::TwoNPlusOne).build();
        let d = with_context(now, &PathView::default(), &mut rng, |cx| {
            p.on_data_lost(cx, &lost(1))
        });
        assert_eq!(
            d,
            Decision::Retransmit {
                send_at: vec![now; 3],
                opportunistic: false
            }
        );
        assert_eq!(p.name(), "2n+1");
        let l = lost(1).with_kind(DataKind::Datagram);
        assert_eq!(
            with_context(now, &PathView::default(), &mut rng, |cx| p
                .on_data_lost(cx, &l)),
            Decision::Drop
        );
    }

    proptest! {
        #[test]
        fn level_is_the_rule_capped(n in any::<u32>()) {
            let m = u64::from(n.max(1));
            prop_assert_eq!(u64::from(RoundRule::TwoNPlusOne.level(n)), (2 * m + 1).min(MAX_REPLICAS as u64));
            prop_assert_eq!(u64::from(RoundRule::Or3.level(n)), (2 * m - 1).min(MAX_REPLICAS as u64));
        }
    }
}
