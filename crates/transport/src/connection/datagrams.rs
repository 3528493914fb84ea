//! Unreliable DATAGRAM frames (RFC 9221): the application's send and receive
//! calls and the bounded receive queue behind them.

use std::collections::VecDeque;

use super::Connection;
use crate::config::TransportConfig;

impl Connection {
    /// Largest DATAGRAM payload the peer accepts, once known (None: no support).
    pub fn max_datagram_payload(&self) -> Option<usize> {
        let peer = self.peer_max_datagram_frame?;
        // Room in one packet: MTU minus short header (1+20+4), tag and frame header.
        let room = usize::from(self.max_datagram_size).saturating_sub(1 + 20 + 4 + 16 + 1 + 8);
        Some(room.min(usize::try_from(peer).unwrap_or(usize::MAX)))
    }

    /// Queue an unreliable DATAGRAM (RFC 9221). Fails when the peer does not
    /// accept datagrams or the payload does not fit in one packet.
    pub fn send_datagram(&mut self, data: Vec<u8>) -> Result<(), DatagramError> {
        let max = self
            .max_datagram_payload()
            .ok_or(DatagramError::UnsupportedByPeer)?;
        if data.len() > max {
            return Err(DatagramError::TooLarge { max });
        }
        self.datagrams_out.push_back(data);
        Ok(())
    }

    /// DATAGRAM payloads queued by [`Connection::send_datagram`] and not yet
    /// sent (congestion control holds them back): an application that
    /// produces datagrams at its own pace bounds its backlog with this.
    pub fn datagrams_queued(&self) -> usize {
        self.datagrams_out.len()
    }

    /// Take a received DATAGRAM payload, oldest first.
    pub fn recv_datagram(&mut self) -> Option<Vec<u8>> {
        self.datagrams_in.pop()
    }

    /// Received DATAGRAM payloads dropped unread because the receive queue
    /// was full ([`TransportConfig::datagram_receive_frames`],
    /// [`TransportConfig::datagram_receive_buffer`]).
    pub fn datagrams_dropped(&self) -> u64 {
        self.datagrams_in.dropped
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
pub(super) struct DatagramQueue {
    queue: VecDeque<Vec<u8>>,
    /// Sum of the queued payloads' lengths.
    bytes: usize,
    max_frames: usize,
    max_bytes: usize,
    /// Payloads dropped so far.
    pub(super) dropped: u64,
}

impl DatagramQueue {
    /// An empty queue with `config`'s limits.
    pub(super) fn new(config: &TransportConfig) -> DatagramQueue {
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
    pub(super) fn push(&mut self, data: &[u8]) -> bool {
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
    pub(super) fn pop(&mut self) -> Option<Vec<u8>> {
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
