//! `fec:K`: the block-FEC baseline (ART journal §4.1, §7.1, Fig. 22): one
//! XOR repair packet after every K packets of new stream data ("a redundancy
//! ratio of 9:1 means 9 data packets are used to create 1 redundant
//! packet"), with plain QUIC retransmission as the fallback when a block
//! loses more than one packet.
//!
//! The transport builds the repair packets (`transport::connection::fec`).
//! Unlike every other scheme this one needs the receiver's help: the repair
//! frame is private to artq, so it is sent only to receivers that advertise
//! the `artq_fec` transport parameter. Against quinn, aioquic or any other
//! unmodified client, `fec:K` degrades to plain QUIC, which is the papers'
//! argument for sender-only ARQ.

use rand::RngCore;
use transport::policy::{DataKind, Decision, LostData, PathView, RecoveryPolicy};
use wire::frame::MAX_FEC_BLOCK;
use wire::time::Instant;

use crate::registry::SchemeError;

/// K data packets, then one repair packet; ARQ for what FEC cannot rebuild.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecPolicy {
    k: u16,
}

impl FecPolicy {
    /// Blocks of `k` data packets, `k` in `1..=255`.
    pub fn new(k: u32) -> Result<Self, SchemeError> {
        match u16::try_from(k) {
            Ok(k) if k >= 1 && u64::from(k) <= MAX_FEC_BLOCK => Ok(FecPolicy { k }),
            _ => Err(SchemeError::InvalidConfig {
                scheme: format!("fec:{k}"),
                reason: format!("K must be an integer in 1..={MAX_FEC_BLOCK}"),
            }),
        }
    }

    /// Data packets per block.
    pub fn block_size(&self) -> u16 {
        self.k
    }
}

impl RecoveryPolicy for FecPolicy {
    fn name(&self) -> String {
        format!("fec:{}", self.k)
    }

    fn on_data_lost(
        &mut self,
        now: Instant,
        lost: &LostData,
        _path: &PathView,
        _rng: &mut dyn RngCore,
    ) -> Decision {
        match lost.kind {
            DataKind::Stream => Decision::single(now),
            DataKind::Datagram => Decision::Drop,
        }
    }

    fn fec_block_size(&self) -> Option<u16> {
        Some(self.k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport::policy::PolicyFactory;

    #[test]
    fn block_sizes_are_validated() {
        assert!(FecPolicy::new(0).is_err());
        assert!(FecPolicy::new(256).is_err());
        assert_eq!(FecPolicy::new(9).unwrap().build().fec_block_size(), Some(9));
        assert_eq!(FecPolicy::new(9).unwrap().build().name(), "fec:9");
    }
}
