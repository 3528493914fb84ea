//! Block FEC, the baseline the ART papers argue against (journal §4.1, §7.1,
//! Fig. 22): every K protected 1-RTT packets carrying new stream data are
//! followed by one repair packet whose ARTQ_FEC frame holds the XOR of the
//! K packets' `u16 length ‖ plaintext payload` (zero-padded to the longest).
//! A receiver missing exactly one of the K rebuilds its payload, processes
//! its frames and acknowledges its packet number as if it had arrived.
//!
//! This is the one scheme that needs the receiver's cooperation: the
//! repair frame is a private type, sent only to peers that advertised the
//! `artq_fec` transport parameter (artq's receiver does). That dependency
//! on a modified client is exactly why the papers prefer sender-only ARQ.
//!
//! Everything FEC is here: the configuration ([`FecConfig`], set by the
//! `fec:K` scheme), the negotiation rule (`FecConfig::encoder_for`), the
//! encoder and the decoder. The connection only calls them: it adds each
//! new-data packet to the encoder, sends the repair frames it completes,
//! and hands received repair frames to the decoder. The frame's grammar is
//! the wire crate's (`wire::frame::Frame::ArtqFec`). Loss recovery itself
//! stays with the recovery policy: what a block cannot rebuild is
//! retransmitted as plain QUIC would.

use std::collections::BTreeMap;

use wire::frame::MAX_FEC_BLOCK;

/// FEC settings of one endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecConfig {
    /// As a sender: one repair packet after every this many new-data
    /// packets (`fec:K`), when the peer can decode them. `None`: no FEC.
    send_block: Option<u16>,
    /// As a receiver: advertise `artq_fec` and decode repair frames. Off
    /// makes us look like any unmodified receiver (and a repair frame then
    /// is a protocol violation).
    pub accept: bool,
}

impl Default for FecConfig {
    /// Send no repair packets; accept them (artq's receiver helps an artq
    /// sender that asks).
    fn default() -> Self {
        FecConfig {
            send_block: None,
            accept: true,
        }
    }
}

/// A block size outside `1..=MAX_FEC_BLOCK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the FEC block size must be in 1..={MAX_FEC_BLOCK}, not {0}")]
pub struct BlockSizeError(pub u64);

impl FecConfig {
    /// Send one repair packet per `k` data packets, `k` in `1..=255`.
    pub fn with_block(mut self, k: u64) -> Result<Self, BlockSizeError> {
        match u16::try_from(k) {
            Ok(b) if b >= 1 && k <= MAX_FEC_BLOCK => {
                self.send_block = Some(b);
                Ok(self)
            }
            _ => Err(BlockSizeError(k)),
        }
    }

    /// Neither send nor accept repair packets: what any unmodified endpoint
    /// looks like.
    pub fn off() -> Self {
        FecConfig {
            send_block: None,
            accept: false,
        }
    }

    /// The same, sending no repair packets (receiving unchanged).
    pub fn without_sending(mut self) -> Self {
        self.send_block = None;
        self
    }

    /// Data packets per block when sending, if FEC is on.
    pub fn send_block(&self) -> Option<u16> {
        self.send_block
    }

    /// The encoder for a peer whose transport parameters said whether it
    /// decodes repair frames (`artq_fec`): none unless we send FEC and it
    /// can decode them, which is the negotiation.
    pub(crate) fn encoder_for(&self, peer_accepts: bool) -> Option<FecEncoder> {
        let k = self.send_block?;
        if !peer_accepts {
            tracing::warn!("the peer cannot decode FEC repair frames: sending none (plain ARQ)");
            return None;
        }
        Some(FecEncoder::new(usize::from(k)))
    }
}

/// Payloads the receiver keeps for recovery, at most (oldest evicted).
const MAX_STORED: usize = 1024;

/// Sender side: accumulates one block.
#[derive(Debug)]
pub(crate) struct FecEncoder {
    k: usize,
    pns: Vec<u64>,
    acc: Vec<u8>,
    /// Completed blocks' repair frames waiting to be sent: (pns, repair).
    pub ready: Option<(Vec<u64>, Vec<u8>)>,
}

fn xor_into(acc: &mut Vec<u8>, payload: &[u8]) {
    let len = u16::try_from(payload.len()).unwrap_or(u16::MAX);
    let needed = payload.len() + 2;
    if acc.len() < needed {
        acc.resize(needed, 0);
    }
    let lb = len.to_be_bytes();
    acc[0] ^= lb[0];
    acc[1] ^= lb[1];
    for (a, b) in acc[2..].iter_mut().zip(payload) {
        *a ^= *b;
    }
}

impl FecEncoder {
    pub fn new(k: usize) -> Self {
        let k = k.clamp(1, MAX_FEC_BLOCK as usize);
        FecEncoder {
            k,
            pns: Vec::with_capacity(k),
            acc: Vec::new(),
            ready: None,
        }
    }

    /// A new-data packet's plaintext payload, just before protection.
    pub fn add(&mut self, pn: u64, payload: &[u8]) {
        xor_into(&mut self.acc, payload);
        self.pns.push(pn);
        if self.pns.len() >= self.k {
            let pns = std::mem::replace(&mut self.pns, Vec::with_capacity(self.k));
            let repair = std::mem::take(&mut self.acc);
            // An unsent older repair is superseded: its block's packets are
            // long gone by the time a newer block completes.
            self.ready = Some((pns, repair));
        }
    }

    /// Bytes a data packet must leave free so that the repair frame (which
    /// is 2 bytes longer than the longest payload) fits one packet: frame
    /// type (4), first packet number (8), count (2), length (2), the extra
    /// 2 of the symbol, and up to 2 per packet-number delta.
    pub fn frame_overhead(&self) -> usize {
        18 + 2 * self.k
    }

    /// Encode the ready block as an ARTQ_FEC frame body's parts.
    pub fn deltas(pns: &[u64]) -> Vec<u8> {
        use wire::coding::BufMutExt;
        let mut out = Vec::with_capacity(pns.len());
        for w in pns.windows(2) {
            out.put_varint(w[1] - w[0]);
        }
        out
    }
}

/// Receiver side: recent payloads, kept once the peer is seen using FEC.
#[derive(Debug, Default)]
pub(crate) struct FecDecoder {
    active: bool,
    stored: BTreeMap<u64, Vec<u8>>,
}

impl FecDecoder {
    pub fn is_active(&self) -> bool {
        self.active
    }

    pub fn activate(&mut self) {
        self.active = true;
    }

    /// Remember a received packet's plaintext payload.
    pub fn store(&mut self, pn: u64, payload: &[u8]) {
        if !self.active {
            return;
        }
        self.stored.insert(pn, payload.to_vec());
        while self.stored.len() > MAX_STORED {
            self.stored.pop_first();
        }
    }

    /// Rebuild the payload of `missing` from the repair and the other
    /// packets of the block. `None` if any other payload is unavailable or
    /// the result is inconsistent.
    pub fn recover(&self, pns: &[u64], missing: u64, repair: &[u8]) -> Option<Vec<u8>> {
        let mut acc = repair.to_vec();
        if acc.len() < 2 {
            return None;
        }
        for &pn in pns {
            if pn == missing {
                continue;
            }
            let payload = self.stored.get(&pn)?;
            if payload.len() + 2 > acc.len() {
                return None; // not the block this repair was computed over
            }
            xor_into(&mut acc, payload);
        }
        let len = usize::from(u16::from_be_bytes([acc[0], acc[1]]));
        if len == 0 || len + 2 > acc.len() {
            return None;
        }
        Some(acc[2..2 + len].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any single loss in a block is recovered exactly; two are not.
    #[test]
    fn any_single_loss_is_recovered() {
        let payloads: Vec<Vec<u8>> = (0..9u8)
            .map(|i| vec![i.wrapping_mul(37); 100 + i as usize * 50])
            .collect();
        let mut enc = FecEncoder::new(9);
        for (i, p) in payloads.iter().enumerate() {
            enc.add(10 + i as u64 * 2, p);
        }
        let (pns, repair) = enc.ready.take().expect("block complete");
        assert_eq!(pns, (0..9).map(|i| 10 + i * 2).collect::<Vec<u64>>());
        for lost in 0..9 {
            let mut dec = FecDecoder::default();
            dec.activate();
            for (i, p) in payloads.iter().enumerate() {
                if i != lost {
                    dec.store(pns[i], p);
                }
            }
            assert_eq!(
                dec.recover(&pns, pns[lost], &repair).as_deref(),
                Some(&payloads[lost][..])
            );
        }
        // Two losses: the other payload is missing, nothing is invented.
        let mut dec = FecDecoder::default();
        dec.activate();
        for (i, p) in payloads.iter().enumerate().skip(2) {
            dec.store(pns[i], p);
        }
        assert_eq!(dec.recover(&pns, pns[0], &repair), None);
    }

    #[test]
    fn hostile_repairs_do_not_panic() {
        let mut dec = FecDecoder::default();
        dec.activate();
        dec.store(1, &[1, 2, 3]);
        assert_eq!(dec.recover(&[1, 2], 2, &[]), None);
        assert_eq!(dec.recover(&[1, 2], 2, &[0xff, 0xff, 0]), None);
        assert_eq!(dec.recover(&[1, 2], 2, &[0]), None);
        // A repair whose length prefix cancels to 0 against the stored
        // payload's (3 ^ 3): no payload of length 0 exists, nothing is
        // recovered.
        assert_eq!(dec.recover(&[1, 2], 2, &[0, 3, 1, 1, 1]), None);
        // A length past the repair's end: nothing.
        assert_eq!(dec.recover(&[1, 2], 2, &[0, 7, 1, 1, 1]), None);
        // A well-formed one (length 2 ^ 3 = 1 after the stored payload):
        // the first byte only.
        assert_eq!(dec.recover(&[1, 2], 2, &[0, 2, 9, 2, 3]), Some(vec![8]));
    }
}
