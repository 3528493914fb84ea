//! Decoding a packet payload into frames (RFC 9000 §12.4, §19).

use super::{frame_type as t, AckFrame, EcnCounts, Frame, MAX_STREAM_COUNT, MAX_STREAM_OFFSET};
use crate::cid::ConnectionId;
use crate::coding::Reader;
use crate::error::DecodeError;
use crate::side::{Dir, StreamId};

/// Reason attached to a frame that ends before its fields do.
const TRUNCATED: &str = "truncated frame";

/// Iterates over the frames of a decrypted packet payload.
///
/// Yields `Err` for the first malformed or unknown frame and then stops
/// (`None`): a payload cannot be resynchronised after a bad frame, and the
/// connection must close with [`DecodeError::error_code`] (RFC 9000 §12.4).
/// Truncated frames are reported as [`DecodeError::MalformedFrame`] so that
/// the code is FRAME_ENCODING_ERROR. Nothing allocates except ACK range lists.
#[derive(Clone, Debug)]
pub struct FrameIter<'a> {
    r: Reader<'a>,
    failed: bool,
}

impl<'a> FrameIter<'a> {
    /// Frames of `payload` (the plaintext after the packet number).
    pub fn new(payload: &'a [u8]) -> Self {
        FrameIter {
            r: Reader::new(payload),
            failed: false,
        }
    }

    /// Bytes not yet decoded.
    pub fn remaining(&self) -> usize {
        self.r.remaining()
    }

    fn decode_next(&mut self) -> Result<Frame<'a>, DecodeError> {
        // RFC 9000 §12.4: frame types are varints; a CONNECTION_CLOSE for an
        // unreadable type reports type 0 ("unknown").
        let ty = self.r.varint().map_err(|_| DecodeError::MalformedFrame {
            frame_type: 0,
            reason: TRUNCATED,
        })?;
        decode_body(ty, &mut self.r).map_err(|e| match e {
            DecodeError::UnexpectedEnd => DecodeError::MalformedFrame {
                frame_type: ty,
                reason: TRUNCATED,
            },
            DecodeError::InvalidValue(reason) => DecodeError::MalformedFrame {
                frame_type: ty,
                reason,
            },
            other => other,
        })
    }
}

impl<'a> Iterator for FrameIter<'a> {
    type Item = Result<Frame<'a>, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let frame = self.decode_next();
        self.failed = frame.is_err();
        Some(frame)
    }
}

impl core::iter::FusedIterator for FrameIter<'_> {}

fn malformed(frame_type: u64, reason: &'static str) -> DecodeError {
    DecodeError::MalformedFrame { frame_type, reason }
}

/// RFC 9000 §19.6, §19.8: offset plus length must not exceed 2^62-1.
fn check_offset(ty: u64, offset: u64, len: usize) -> Result<(), DecodeError> {
    match u64::try_from(len).ok().and_then(|l| offset.checked_add(l)) {
        Some(end) if end <= MAX_STREAM_OFFSET => Ok(()),
        _ => Err(malformed(ty, "offset plus length exceeds 2^62-1")),
    }
}

/// RFC 9000 §19.11, §19.14: stream counts above 2^60 are FRAME_ENCODING_ERROR.
fn check_count(ty: u64, count: u64) -> Result<u64, DecodeError> {
    if count > MAX_STREAM_COUNT {
        Err(malformed(ty, "stream count exceeds 2^60"))
    } else {
        Ok(count)
    }
}

fn decode_body<'a>(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, DecodeError> {
    let frame = match ty {
        t::STREAM..=t::STREAM_MAX => {
            // RFC 9000 §19.8: the hot path.
            let id = StreamId(r.varint()?);
            let offset = if ty & t::STREAM_OFF_BIT != 0 {
                r.varint()?
            } else {
                0
            };
            let data = if ty & t::STREAM_LEN_BIT != 0 {
                let len = r.varint()?;
                r.bytes_u64(len)?
            } else {
                r.rest()
            };
            check_offset(ty, offset, data.len())?;
            Frame::Stream {
                id,
                offset,
                fin: ty & t::STREAM_FIN_BIT != 0,
                data,
            }
        }
        t::PADDING => {
            // RFC 9000 §19.1: fold the run of padding into one frame.
            let run = r.peek_rest().iter().take_while(|&&b| b == 0).count();
            r.skip(run)?;
            Frame::Padding { len: run + 1 }
        }
        t::PING => Frame::Ping,
        t::ACK | t::ACK_ECN => Frame::Ack(decode_ack(ty, r)?),
        t::RESET_STREAM => Frame::ResetStream {
            id: StreamId(r.varint()?),
            error_code: r.varint()?,
            final_size: r.varint()?,
        },
        t::STOP_SENDING => Frame::StopSending {
            id: StreamId(r.varint()?),
            error_code: r.varint()?,
        },
        t::CRYPTO => {
            let offset = r.varint()?;
            let len = r.varint()?;
            let data = r.bytes_u64(len)?;
            check_offset(ty, offset, data.len())?;
            Frame::Crypto { offset, data }
        }
        t::NEW_TOKEN => {
            let len = r.varint()?;
            let token = r.bytes_u64(len)?;
            // RFC 9000 §19.7: an empty token is a FRAME_ENCODING_ERROR.
            if token.is_empty() {
                return Err(malformed(ty, "empty NEW_TOKEN"));
            }
            Frame::NewToken { token }
        }
        t::MAX_DATA => Frame::MaxData(r.varint()?),
        t::MAX_STREAM_DATA => Frame::MaxStreamData {
            id: StreamId(r.varint()?),
            max: r.varint()?,
        },
        t::MAX_STREAMS_BIDI => Frame::MaxStreams {
            dir: Dir::Bi,
            count: check_count(ty, r.varint()?)?,
        },
        t::MAX_STREAMS_UNI => Frame::MaxStreams {
            dir: Dir::Uni,
            count: check_count(ty, r.varint()?)?,
        },
        t::DATA_BLOCKED => Frame::DataBlocked { limit: r.varint()? },
        t::STREAM_DATA_BLOCKED => Frame::StreamDataBlocked {
            id: StreamId(r.varint()?),
            limit: r.varint()?,
        },
        t::STREAMS_BLOCKED_BIDI => Frame::StreamsBlocked {
            dir: Dir::Bi,
            limit: check_count(ty, r.varint()?)?,
        },
        t::STREAMS_BLOCKED_UNI => Frame::StreamsBlocked {
            dir: Dir::Uni,
            limit: check_count(ty, r.varint()?)?,
        },
        t::NEW_CONNECTION_ID => {
            // RFC 9000 §19.15.
            let sequence = r.varint()?;
            let retire_prior_to = r.varint()?;
            if retire_prior_to > sequence {
                return Err(malformed(ty, "retire_prior_to exceeds sequence number"));
            }
            let len = usize::from(r.u8()?);
            if !(1..=ConnectionId::MAX_LEN).contains(&len) {
                return Err(malformed(ty, "connection ID length not in 1..=20"));
            }
            let cid = ConnectionId::new(r.bytes(len)?)?;
            let reset_token = r.array::<16>()?;
            Frame::NewConnectionId {
                sequence,
                retire_prior_to,
                cid,
                reset_token,
            }
        }
        t::RETIRE_CONNECTION_ID => Frame::RetireConnectionId {
            sequence: r.varint()?,
        },
        t::PATH_CHALLENGE => Frame::PathChallenge(r.array()?),
        t::PATH_RESPONSE => Frame::PathResponse(r.array()?),
        t::CONNECTION_CLOSE | t::CONNECTION_CLOSE_APP => {
            // RFC 9000 §19.19: only the transport variant has a Frame Type field.
            let error_code = r.varint()?;
            let frame_type = if ty == t::CONNECTION_CLOSE {
                Some(r.varint()?)
            } else {
                None
            };
            let len = r.varint()?;
            let reason = r.bytes_u64(len)?;
            Frame::ConnectionClose {
                error_code,
                frame_type,
                reason,
            }
        }
        t::HANDSHAKE_DONE => Frame::HandshakeDone,
        t::DATAGRAM => Frame::Datagram { data: r.rest() },
        t::DATAGRAM_LEN => {
            let len = r.varint()?;
            Frame::Datagram {
                data: r.bytes_u64(len)?,
            }
        }
        t::ARTQ_FEC => {
            let first_pn = r.varint()?;
            let count = r.varint()?;
            if count == 0 || count > super::MAX_FEC_BLOCK {
                return Err(malformed(ty, "FEC block size out of range"));
            }
            let rest = r.peek_rest();
            let start = r.position();
            let mut pn = first_pn;
            for _ in 1..count {
                let d = r.varint()?;
                if d == 0 {
                    return Err(malformed(ty, "FEC packet numbers not increasing"));
                }
                pn = pn
                    .checked_add(d)
                    .ok_or_else(|| malformed(ty, "FEC packet number overflow"))?;
            }
            let deltas = &rest[..r.position() - start];
            let len = r.varint()?;
            let repair = r.bytes_u64(len)?;
            Frame::ArtqFec(super::FecRepair {
                first_pn,
                count,
                deltas,
                repair,
            })
        }
        _ => return Err(DecodeError::UnknownFrameType(ty)),
    };
    Ok(frame)
}

/// RFC 9000 §19.3: ACK ranges, resolved from gaps into descending ranges.
fn decode_ack(ty: u64, r: &mut Reader<'_>) -> Result<AckFrame, DecodeError> {
    let largest = r.varint()?;
    let delay = r.varint()?;
    let count = r.varint()?;
    let first = r.varint()?;
    let mut smallest = largest
        .checked_sub(first)
        .ok_or(malformed(ty, "first ACK range exceeds largest"))?;
    // Each further range takes at least two bytes (Gap and Length): bound
    // the count by what is left before allocating for it.
    let extra = usize::try_from(count)
        .ok()
        .filter(|&c| c <= r.remaining() / 2)
        .ok_or(malformed(ty, "ACK range count exceeds frame size"))?;
    let mut ranges = Vec::with_capacity(extra + 1);
    ranges.push(smallest..=largest);
    for _ in 0..extra {
        let gap = r.varint()?;
        let len = r.varint()?;
        // RFC 9000 §19.3.1: largest = previous smallest - gap - 2.
        let hi = smallest
            .checked_sub(gap)
            .and_then(|v| v.checked_sub(2))
            .ok_or(malformed(ty, "ACK gap below packet number 0"))?;
        let lo = hi
            .checked_sub(len)
            .ok_or(malformed(ty, "ACK range below packet number 0"))?;
        ranges.push(lo..=hi);
        smallest = lo;
    }
    let ecn = if ty == t::ACK_ECN {
        Some(EcnCounts {
            ect0: r.varint()?,
            ect1: r.varint()?,
            ce: r.varint()?,
        })
    } else {
        None
    };
    Ok(AckFrame {
        largest,
        delay,
        ranges,
        ecn,
    })
}
