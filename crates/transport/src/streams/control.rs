//! Stream control frames: flow-control credit, stream limits, resets and
//! blocked signals (RFC 9000 §19.4, §19.5, §19.9–§19.14).
//!
//! What is pending is a set of keys ([`Pending`]), not frames: the frame is
//! built when a packet has room, with the value current at that moment, so a
//! MAX_DATA queued twice is sent once with the latest limit. A sent packet
//! keeps the small [`ControlFrame`] record; if the packet is lost, the frame
//! is queued again only while its value is still the current one (RFC 9000
//! §13.3: "an updated value is sent ... when the packet containing the most
//! recently sent frame is declared lost").

use wire::frame::Frame;
use wire::{Dir, StreamId};

/// A control frame as sent, kept in the sent-packet record (small and `Copy`)
/// so that a loss or acknowledgement can be mapped back to stream state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlFrame {
    /// MAX_DATA with this connection-level limit.
    MaxData(u64),
    /// MAX_STREAM_DATA for a stream.
    MaxStreamData {
        /// The stream.
        id: StreamId,
        /// The limit sent.
        max: u64,
    },
    /// MAX_STREAMS for one direction.
    MaxStreams {
        /// Stream kind.
        dir: Dir,
        /// Cumulative count sent.
        count: u64,
    },
    /// RESET_STREAM: we abandoned our sending half.
    ResetStream {
        /// The stream.
        id: StreamId,
        /// Application error code.
        error_code: u64,
        /// Final size sent.
        final_size: u64,
    },
    /// STOP_SENDING: we no longer read the stream.
    StopSending {
        /// The stream.
        id: StreamId,
        /// Application error code.
        error_code: u64,
    },
    /// DATA_BLOCKED at the peer's connection limit.
    DataBlocked {
        /// The limit we are blocked at.
        limit: u64,
    },
    /// STREAM_DATA_BLOCKED at a stream limit.
    StreamDataBlocked {
        /// The stream.
        id: StreamId,
        /// The limit we are blocked at.
        limit: u64,
    },
    /// STREAMS_BLOCKED at the peer's stream count limit.
    StreamsBlocked {
        /// Stream kind.
        dir: Dir,
        /// The count limit we hit.
        limit: u64,
    },
}

impl ControlFrame {
    /// The wire frame.
    pub fn to_frame(self) -> Frame<'static> {
        match self {
            ControlFrame::MaxData(max) => Frame::MaxData(max),
            ControlFrame::MaxStreamData { id, max } => Frame::MaxStreamData { id, max },
            ControlFrame::MaxStreams { dir, count } => Frame::MaxStreams { dir, count },
            ControlFrame::ResetStream {
                id,
                error_code,
                final_size,
            } => Frame::ResetStream {
                id,
                error_code,
                final_size,
            },
            ControlFrame::StopSending { id, error_code } => Frame::StopSending { id, error_code },
            ControlFrame::DataBlocked { limit } => Frame::DataBlocked { limit },
            ControlFrame::StreamDataBlocked { id, limit } => Frame::StreamDataBlocked { id, limit },
            ControlFrame::StreamsBlocked { dir, limit } => Frame::StreamsBlocked { dir, limit },
        }
    }

    /// Appends the frame's encoding to `out`.
    pub fn encode(self, out: &mut Vec<u8>) {
        self.to_frame().encode(out);
    }

    /// The pending-queue key this frame belongs to.
    pub(crate) fn key(self) -> Pending {
        match self {
            ControlFrame::MaxData(_) => Pending::MaxData,
            ControlFrame::MaxStreamData { id, .. } => Pending::MaxStreamData(id),
            ControlFrame::MaxStreams { dir, .. } => Pending::MaxStreams(dir),
            ControlFrame::ResetStream { id, .. } => Pending::ResetStream(id),
            ControlFrame::StopSending { id, .. } => Pending::StopSending(id),
            ControlFrame::DataBlocked { .. } => Pending::DataBlocked,
            ControlFrame::StreamDataBlocked { id, .. } => Pending::StreamDataBlocked(id),
            ControlFrame::StreamsBlocked { dir, .. } => Pending::StreamsBlocked(dir),
        }
    }
}

/// A control frame waiting for room in a packet; its value is read when it
/// is written. Variant order is send priority: resets and credit first, so a
/// blocked peer is unblocked before we complain about being blocked ourselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Pending {
    /// RESET_STREAM for a stream.
    ResetStream(StreamId),
    /// STOP_SENDING for a stream.
    StopSending(StreamId),
    /// MAX_DATA.
    MaxData,
    /// MAX_STREAMS for a direction.
    MaxStreams(Dir),
    /// MAX_STREAM_DATA for a stream.
    MaxStreamData(StreamId),
    /// DATA_BLOCKED.
    DataBlocked,
    /// STREAM_DATA_BLOCKED for a stream.
    StreamDataBlocked(StreamId),
    /// STREAMS_BLOCKED for a direction.
    StreamsBlocked(Dir),
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::FrameIter;

    #[test]
    fn round_trips_through_the_codec() {
        let frames = [
            ControlFrame::MaxData(1 << 40),
            ControlFrame::MaxStreamData {
                id: StreamId(4),
                max: 77,
            },
            ControlFrame::MaxStreams {
                dir: Dir::Uni,
                count: 3,
            },
            ControlFrame::ResetStream {
                id: StreamId(8),
                error_code: 5,
                final_size: 1000,
            },
            ControlFrame::StopSending {
                id: StreamId(1),
                error_code: 2,
            },
            ControlFrame::DataBlocked { limit: 9 },
            ControlFrame::StreamDataBlocked {
                id: StreamId(2),
                limit: 10,
            },
            ControlFrame::StreamsBlocked {
                dir: Dir::Bi,
                limit: 100,
            },
        ];
        let mut out = Vec::new();
        for f in frames {
            f.encode(&mut out);
        }
        let decoded: Vec<Frame<'_>> = FrameIter::new(&out).map(|f| f.unwrap()).collect();
        let expected: Vec<Frame<'_>> = frames.iter().map(|f| f.to_frame()).collect();
        assert_eq!(decoded, expected);
        assert!(
            std::mem::size_of::<ControlFrame>() <= 32,
            "kept in every sent packet"
        );
    }
}
