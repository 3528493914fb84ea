//! `fec:K`: the block-FEC baseline (ART journal §4.1, §7.1, Fig. 22): one
//! XOR repair packet after every K packets of new stream data ("a redundancy
//! ratio of 9:1 means 9 data packets are used to create 1 redundant
//! packet"), with plain QUIC retransmission as the fallback when a block
//! loses more than one packet.
//!
//! The transport builds and decodes the repair packets (`transport::fec`).
//! Unlike every other scheme this one needs the receiver's help: the repair
//! frame is private to artq, so it is sent only to receivers that advertise
//! the `artq_fec` transport parameter. Against quinn, aioquic or any other
//! unmodified client, `fec:K` degrades to plain QUIC, which is the papers'
//! argument for sender-only ARQ.

use transport::policy::{Decision, LostData, PolicyContext, QuicPolicy, RecoveryPolicy};
use wire::frame::MAX_FEC_BLOCK;

use crate::error::SchemeError;

/// The retransmission half of `fec:K`: plain QUIC's (one replica per loss,
/// DATAGRAM data given up), under the scheme's name. The coding half is the
/// transport's (`transport::fec`), switched on by [`crate::Scheme::configure`]
/// with [`FecPolicy::block_size`].
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

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        QuicPolicy.on_data_lost(cx, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport::policy::PolicyFactory;

    #[test]
    fn validates_k() {
        assert!(FecPolicy::new(0).is_err());
        assert!(FecPolicy::new(256).is_err());
        assert_eq!(FecPolicy::new(9).unwrap().block_size(), 9);
        assert_eq!(FecPolicy::new(9).unwrap().build().name(), "fec:9");
    }
}
