//! Unreliable DATAGRAM frames (RFC 9221): the connection's [`Datagrams`]
//! (what to send, what arrived, the peer's limit) and the bounded receive
//! queue behind them.

use std::collections::VecDeque;

use crate::config::TransportConfig;

/// The connection's unreliable DATAGRAM frames (RFC 9221): what the
/// application queued to send, what arrived and waits to be read, and the
/// peer's limit.
///
/// Exists so the DATAGRAM extension has one owner: the send path drains
/// [`Datagrams::next_to_send`], the receive path fills the bounded
/// incoming queue, and the application's calls on
/// [`Connection`](super::Connection) delegate here.
#[derive(Debug)]
pub(super) struct Datagrams {
    /// Payloads the application queued, not yet in a packet.
    outgoing: VecDeque<Vec<u8>>,
    /// Payloads received, not yet read.
    incoming: DatagramQueue,
    /// The peer's max_datagram_frame_size (None: no support, or not yet
    /// known).
    peer_max_frame: Option<u64>,
}

impl Datagrams {
    /// No datagrams yet; the receive queue bounded by `config`.
    pub(super) fn new(config: &TransportConfig) -> Datagrams {
        Datagrams {
            outgoing: VecDeque::new(),
            incoming: DatagramQueue::new(config),
            peer_max_frame: None,
        }
    }

    /// The peer's transport parameter arrived.
    pub(super) fn set_peer_max_frame(&mut self, max: Option<u64>) {
        self.peer_max_frame = max;
    }

    /// Largest DATAGRAM payload the peer accepts in a packet of `mtu`
    /// bytes, once known (None: no support).
    pub(super) fn max_payload(&self, mtu: u16) -> Option<usize> {
        let peer = self.peer_max_frame?;
        // Room in one packet: MTU minus short header (1+20+4), tag and frame header.
        let room = usize::from(mtu).saturating_sub(1 + 20 + 4 + 16 + 1 + 8);
        Some(room.min(usize::try_from(peer).unwrap_or(usize::MAX)))
    }

    /// Queues `data` to send if the peer accepts it in a packet of `mtu`
    /// bytes.
    pub(super) fn send(&mut self, data: Vec<u8>, mtu: u16) -> Result<(), DatagramError> {
        let max = self
            .max_payload(mtu)
            .ok_or(DatagramError::UnsupportedByPeer)?;
        if data.len() > max {
            return Err(DatagramError::TooLarge { max });
        }
        self.outgoing.push_back(data);
        Ok(())
    }

    /// Drops the queued payloads longer than `max` (the datagram size went
    /// down: a path MTU black hole), which would otherwise wait at the head
    /// of the queue for good; delivery is unreliable (RFC 9221 §5).
    /// Returns how many were dropped.
    pub(super) fn drop_longer_than(&mut self, max: usize) -> usize {
        let before = self.outgoing.len();
        self.outgoing.retain(|d| d.len() <= max);
        before - self.outgoing.len()
    }

    /// Payloads queued and not yet sent.
    pub(super) fn queued(&self) -> usize {
        self.outgoing.len()
    }

    /// The oldest queued payload, to see whether it fits a packet.
    pub(super) fn peek_outgoing(&self) -> Option<&[u8]> {
        self.outgoing.front().map(Vec::as_slice)
    }

    /// Takes the oldest queued payload (it went into a packet).
    pub(super) fn pop_outgoing(&mut self) -> Option<Vec<u8>> {
        self.outgoing.pop_front()
    }

    /// A payload arrived: queued for the application unless dropped (the
    /// queue is full). True if queued.
    pub(super) fn on_received(&mut self, data: &[u8]) -> bool {
        self.incoming.push(data)
    }

    /// The oldest received payload.
    pub(super) fn recv(&mut self) -> Option<Vec<u8>> {
        self.incoming.pop()
    }

    /// Received payloads dropped unread.
    pub(super) fn dropped(&self) -> u64 {
        self.incoming.dropped
    }
}

/// DATAGRAM payloads received and not yet read by the application.
///
/// Exists so a peer cannot grow our memory by sending datagrams we do not
/// read: at most [`TransportConfig::datagram_receive_frames`] payloads and
/// [`TransportConfig::datagram_receive_buffer`] bytes are kept. DATAGRAM
/// delivery is unreliable (RFC 9221 §5), so when a new payload does not fit
/// the oldest are dropped first: an application that falls behind gets the
/// freshest data, which is what real-time uses want. A payload larger than
/// the whole byte budget is dropped itself.
#[derive(Debug)]
struct DatagramQueue {
    queue: VecDeque<Vec<u8>>,
    /// Sum of the queued payloads' lengths.
    bytes: usize,
    max_frames: usize,
    max_bytes: usize,
    /// Payloads dropped so far.
    dropped: u64,
}

impl DatagramQueue {
    /// An empty queue with `config`'s limits.
    fn new(config: &TransportConfig) -> DatagramQueue {
        DatagramQueue {
            queue: VecDeque::new(),
            bytes: 0,
            max_frames: config.datagram_receive_frames,
            max_bytes: config.datagram_receive_buffer,
            dropped: 0,
        }
    }

    /// Queues a received payload, dropping the oldest to make room. False
    /// if the payload itself was dropped.
    fn push(&mut self, data: &[u8]) -> bool {
        if data.len() > self.max_bytes || self.max_frames == 0 {
            self.dropped += 1;
            return false;
        }
        while self.queue.len() >= self.max_frames || self.bytes + data.len() > self.max_bytes {
            let Some(old) = self.queue.pop_front() else {
                break;
            };
            self.bytes -= old.len();
            self.dropped += 1;
        }
        self.bytes += data.len();
        self.queue.push_back(data.to_vec());
        true
    }

    /// The oldest payload.
    fn pop(&mut self) -> Option<Vec<u8>> {
        let data = self.queue.pop_front()?;
        self.bytes -= data.len();
        Some(data)
    }
}

/// Why a DATAGRAM could not be queued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    /// The peer did not advertise max_datagram_frame_size (or not yet).
    #[error("the peer does not accept DATAGRAM frames")]
    UnsupportedByPeer,
    /// The payload does not fit in one packet.
    #[error("datagram too large (max {max} bytes)")]
    TooLarge {
        /// Largest payload that fits.
        max: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smaller_datagram_size_drops_only_the_payloads_that_no_longer_fit() {
        let mut d = Datagrams::new(&TransportConfig::default());
        d.set_peer_max_frame(Some(65_535));
        let big = d.max_payload(1452).expect("supported");
        let small = d.max_payload(1350).expect("supported");
        for len in [10, big, small, big - 1] {
            d.send(vec![0; len], 1452).expect("fits 1452");
        }
        assert_eq!(d.drop_longer_than(small), 2);
        assert_eq!(d.queued(), 2);
        assert_eq!(d.pop_outgoing().map(|p| p.len()), Some(10));
        assert_eq!(d.pop_outgoing().map(|p| p.len()), Some(small));
    }
}
