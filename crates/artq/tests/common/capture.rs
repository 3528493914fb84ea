//! Reading `artq link --pcap` captures, and the matrix checks made on them.
//!
//! Why this exists: two matrix cases are about what the server does on the
//! wire, which neither end's download shows: `amplificationlimit` (RFC 9000
//! §8.1: before it has validated the client's address, a server sends at
//! most three times the bytes it received) and `blackhole` (the outage must
//! fall inside the transfer). The relay records every datagram as the
//! server's side of the link sees it, the interop runner's "server trace";
//! only cleartext QUIC header fields (RFC 8999 invariants, v1 long headers)
//! are read here, no decryption.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

/// pcap magic for microsecond timestamps, as read little-endian.
const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// pcap magic for nanosecond timestamps.
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// LINKTYPE_RAW: each record is an IPv4 or IPv6 packet.
const LINKTYPE_RAW: u32 = 101;

/// One captured UDP datagram.
#[derive(Clone, Debug)]
pub struct Record {
    /// Capture time since the relay started (the clock of `--blackhole`).
    pub at: Duration,
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// UDP payload.
    pub payload: Vec<u8>,
}

/// Reads a little-endian pcap file of raw IP packets carrying UDP (what
/// `artq link --pcap` writes).
pub fn read_pcap(path: &Path) -> Result<Vec<Record>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let bad = |what: &str| format!("{}: {what}", path.display());
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let magic = u32_at(&bytes, 0).ok_or_else(|| bad("no pcap header"))?;
    let frac_per_sec = match magic {
        MAGIC_MICROS => 1_000_000u64,
        MAGIC_NANOS => 1_000_000_000,
        m => {
            return Err(bad(&format!(
                "not a little-endian pcap file (magic {m:#x})"
            )))
        }
    };
    if u32_at(&bytes, 20) != Some(LINKTYPE_RAW) {
        return Err(bad("link type is not LINKTYPE_RAW (101)"));
    }
    let mut records = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let (Some(sec), Some(frac), Some(len)) = (
            u32_at(&bytes, at),
            u32_at(&bytes, at + 4),
            u32_at(&bytes, at + 8),
        ) else {
            return Err(bad(&format!("record header cut short at byte {at}")));
        };
        let start = at + 16;
        let end = start + len as usize;
        let packet = bytes
            .get(start..end)
            .ok_or_else(|| bad(&format!("record at byte {at} cut short")))?;
        let (src, dst, payload) =
            parse_ip_udp(packet).ok_or_else(|| bad(&format!("record at byte {at} is not UDP")))?;
        records.push(Record {
            at: Duration::from_secs(u64::from(sec))
                + Duration::from_nanos(u64::from(frac) * 1_000_000_000 / frac_per_sec),
            src,
            dst,
            payload: payload.to_vec(),
        });
        at = end;
    }
    Ok(records)
}

/// Splits an IPv4 or IPv6 packet carrying UDP into its addresses and payload.
fn parse_ip_udp(p: &[u8]) -> Option<(SocketAddr, SocketAddr, &[u8])> {
    let (src_ip, dst_ip, udp): (IpAddr, IpAddr, &[u8]) = match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if *p.get(9)? != 17 {
                return None;
            }
            let src: [u8; 4] = p.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = p.get(16..20)?.try_into().ok()?;
            (
                Ipv4Addr::from(src).into(),
                Ipv4Addr::from(dst).into(),
                p.get(ihl..)?,
            )
        }
        6 => {
            if *p.get(6)? != 17 {
                return None;
            }
            let src: [u8; 16] = p.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = p.get(24..40)?.try_into().ok()?;
            (
                Ipv6Addr::from(src).into(),
                Ipv6Addr::from(dst).into(),
                p.get(40..)?,
            )
        }
        _ => return None,
    };
    let port = |at: usize| Some(u16::from_be_bytes(udp.get(at..at + 2)?.try_into().ok()?));
    let udp_len = usize::from(port(4)?);
    let payload = udp.get(8..udp_len)?;
    Some((
        SocketAddr::new(src_ip, port(0)?),
        SocketAddr::new(dst_ip, port(2)?),
        payload,
    ))
}

/// The kind of one QUIC packet in a datagram, from its cleartext header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// Long header, version 0.
    VersionNegotiation,
    /// v1 Initial.
    Initial,
    /// v1 0-RTT.
    ZeroRtt,
    /// v1 Handshake.
    Handshake,
    /// v1 Retry.
    Retry,
    /// Short header (1-RTT); always the last packet of a datagram.
    Short,
    /// A long header of another version, or one cut short: the walk stops.
    Unreadable,
}

/// One QUIC packet found in a datagram.
#[derive(Clone, Debug)]
pub struct QuicPacket {
    /// What it is.
    pub kind: PacketKind,
    /// Its size in the datagram, bytes.
    pub len: usize,
    /// Destination connection ID (long headers only).
    pub dcid: Vec<u8>,
    /// Source connection ID (long headers only).
    pub scid: Vec<u8>,
}

/// Reads a QUIC variable-length integer at `*at`, advancing it.
fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let first = *b.get(*at)?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(*at..*at + len)?;
    let mut v = u64::from(first & 0x3f);
    for byte in &bytes[1..] {
        v = (v << 8) | u64::from(*byte);
    }
    *at += len;
    Some(v)
}

/// The QUIC packets coalesced in `datagram`, as far as their headers can be
/// read without keys (RFC 9000 §12.2, §17.2).
pub fn quic_packets(datagram: &[u8]) -> Vec<QuicPacket> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while let Some(&first) = rest.first() {
        let whole = |kind| QuicPacket {
            kind,
            len: rest.len(),
            dcid: Vec::new(),
            scid: Vec::new(),
        };
        if first & 0x80 == 0 {
            out.push(whole(PacketKind::Short));
            break;
        }
        let Some(p) = long_header(rest) else {
            out.push(whole(PacketKind::Unreadable));
            break;
        };
        let last = matches!(p.kind, PacketKind::VersionNegotiation | PacketKind::Retry);
        rest = &rest[p.len..];
        out.push(p);
        if last {
            break;
        }
    }
    out
}

/// The long-header packet at the start of `b`, if its header reads.
fn long_header(b: &[u8]) -> Option<QuicPacket> {
    let version = u32::from_be_bytes(b.get(1..5)?.try_into().ok()?);
    let mut at = 5;
    let dcid_len = usize::from(*b.get(at)?);
    let dcid = b.get(at + 1..at + 1 + dcid_len)?.to_vec();
    at += 1 + dcid_len;
    let scid_len = usize::from(*b.get(at)?);
    let scid = b.get(at + 1..at + 1 + scid_len)?.to_vec();
    at += 1 + scid_len;
    let packet = |kind, len| {
        Some(QuicPacket {
            kind,
            len,
            dcid: dcid.clone(),
            scid: scid.clone(),
        })
    };
    if version == 0 {
        return packet(PacketKind::VersionNegotiation, b.len());
    }
    if version != 1 {
        return None;
    }
    let kind = match (b[0] >> 4) & 0x03 {
        0 => PacketKind::Initial,
        1 => PacketKind::ZeroRtt,
        2 => PacketKind::Handshake,
        _ => return packet(PacketKind::Retry, b.len()),
    };
    if kind == PacketKind::Initial {
        let token_len = usize::try_from(varint(b, &mut at)?).ok()?;
        at = at.checked_add(token_len)?;
    }
    let length = usize::try_from(varint(b, &mut at)?).ok()?;
    let end = at.checked_add(length)?;
    (end <= b.len()).then_some(())?;
    packet(kind, end)
}

/// The datagrams of `records` from and to `server`, in capture order.
fn split<'a>(
    records: &'a [Record],
    server: SocketAddr,
) -> impl Iterator<Item = (bool, &'a Record)> + 'a {
    records
        .iter()
        .filter(move |r| r.src == server || r.dst == server)
        .map(move |r| (r.src == server, r))
}

/// RFC 9000 §8.1, checked on a capture at the server's side of the link as
/// the interop runner checks it: until the server can consider the client's
/// address validated, the bytes it sends must stay below four times the
/// bytes it received. Three times is the RFC's limit; the runner lets a
/// server that exceeds it by less than one more times "slide" (quic-go's own
/// server, which ACKs the first half of a two-packet ClientHello before it
/// has the rest, ends up 37 bytes over 3x), so the account returned says by
/// how much the server went over 3x, if it did. Validation is
/// the first client datagram holding a Handshake or 1-RTT packet, or an
/// Initial addressed to a connection ID of at least 8 bytes that the server
/// chose (RFC 9000 §8.1, as the interop runner counts it). Also checks that
/// the server sent at least `min_handshake_bytes` in Handshake packets over
/// the whole capture, i.e. that it really sent the large certificate chain
/// that makes the limit bite.
///
/// Returns a one-line account (bytes received and sent before validation).
pub fn check_amplification(
    records: &[Record],
    server: SocketAddr,
    min_handshake_bytes: usize,
) -> Result<String, String> {
    let mut received = 0usize;
    let mut sent = 0usize;
    let mut most_over_3x = 0usize;
    let mut server_cids: Vec<Vec<u8>> = Vec::new();
    let mut validated_at = None;
    for (from_server, r) in split(records, server) {
        let packets = quic_packets(&r.payload);
        if from_server {
            for p in &packets {
                if p.kind == PacketKind::Initial && p.scid.len() >= 8 {
                    server_cids.push(p.scid.clone());
                }
            }
            sent += r.payload.len();
            most_over_3x = most_over_3x.max(sent.saturating_sub(3 * received));
            if sent >= 4 * received {
                return Err(format!(
                    "the server sent {sent} bytes before validating the client's address, \
                     having received {received} (at {:?}: a {}-byte datagram): more than three \
                     times as much, and beyond the interop runner's tolerance (4x)",
                    r.at,
                    r.payload.len()
                ));
            }
        } else {
            let validates = packets.iter().any(|p| {
                matches!(p.kind, PacketKind::Handshake | PacketKind::Short)
                    || (p.kind == PacketKind::Initial && server_cids.contains(&p.dcid))
            });
            if validates {
                validated_at = Some(r.at);
                break;
            }
            received += r.payload.len();
        }
    }
    let Some(validated_at) = validated_at else {
        return Err(format!(
            "the client never validated its address (no Handshake packet reached the server); \
             {received} bytes received, {sent} sent"
        ));
    };
    let handshake_bytes: usize = split(records, server)
        .filter(|(from_server, _)| *from_server)
        .flat_map(|(_, r)| quic_packets(&r.payload))
        .filter(|p| p.kind == PacketKind::Handshake)
        .map(|p| p.len)
        .sum();
    if handshake_bytes < min_handshake_bytes {
        return Err(format!(
            "the server sent only {handshake_bytes} bytes of Handshake packets, fewer than \
             {min_handshake_bytes}: it did not send the long certificate chain, so the limit \
             was not tested"
        ));
    }
    let over = match most_over_3x {
        0 => String::from("within 3x"),
        n => format!("at most {n} bytes over 3x, within the runner's tolerance"),
    };
    Ok(format!(
        "before the client's address was validated at {validated_at:?} the server received \
         {received} bytes and sent {sent} ({over}); {handshake_bytes} bytes of Handshake packets \
         in all"
    ))
}

/// How long datagrams that entered the link before an outage keep arriving
/// after it began: the one-way delay and a full queue at the matrix's rates
/// (15 ms + 25 packets at 10 Mbit/s), with margin.
pub const OUTAGE_DRAIN: Duration = Duration::from_millis(200);

/// Checks that the connection spans the outage `[from, until)`: the server
/// sent datagrams before it began and after it ended, and no client datagram
/// reached the server inside it (the relay's clock is the capture's), but
/// for those already in the link when it began ([`OUTAGE_DRAIN`]).
pub fn check_outage_spanned(
    records: &[Record],
    server: SocketAddr,
    from: Duration,
    until: Duration,
) -> Result<String, String> {
    let sent: Vec<Duration> = split(records, server)
        .filter(|(s, _)| *s)
        .map(|(_, r)| r.at)
        .collect();
    let (Some(first), Some(last)) = (sent.first(), sent.last()) else {
        return Err("the capture holds no datagram from the server".into());
    };
    if *first >= from || *last < until {
        return Err(format!(
            "the server sent from {first:?} to {last:?}: the outage {from:?}..{until:?} did \
             not fall inside the connection"
        ));
    }
    let quiet_from = from + OUTAGE_DRAIN;
    if let Some((_, r)) =
        split(records, server).find(|(s, r)| !*s && r.at >= quiet_from && r.at < until)
    {
        return Err(format!(
            "a client datagram reached the server at {:?}, inside the outage",
            r.at
        ));
    }
    Ok(format!(
        "the server sent datagrams from {first:?} to {last:?}, across the outage"
    ))
}
