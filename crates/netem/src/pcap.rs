//! A minimal pcap writer: UDP datagrams as raw IPv4/IPv6 packets.
//!
//! Exists for the relay's capture (`artq link --pcap FILE`): what the server's
//! side of an emulated link saw, readable by Wireshark or tshark (which
//! decrypt QUIC given a client's `SSLKEYLOGFILE`) and by the interop tests.
//! The format is classic pcap (little-endian, microsecond timestamps, link
//! type `LINKTYPE_RAW` = 101): each record is an IP header (IPv4 with a
//! correct header checksum, or IPv6), a UDP header (checksum computed for
//! IPv6, where it is mandatory; 0, "none", for IPv4) and the payload.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};

use wire::time::Duration;

/// pcap's magic number (microsecond timestamps).
const MAGIC: u32 = 0xa1b2_c3d4;
/// `LINKTYPE_RAW`: records start with an IPv4 or IPv6 header.
const LINKTYPE_RAW: u32 = 101;
/// Largest record: the largest IP packet.
const SNAPLEN: u32 = 65_535;
/// IPv4 header length (no options).
const IPV4_HEADER: usize = 20;
/// IPv6 header length.
const IPV6_HEADER: usize = 40;
/// UDP header length.
const UDP_HEADER: usize = 8;
/// IP protocol number of UDP.
const PROTO_UDP: u8 = 17;

/// Writes the pcap file header.
pub fn write_header(out: &mut impl Write) -> io::Result<()> {
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&MAGIC.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&0i32.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&SNAPLEN.to_le_bytes());
    h.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
    out.write_all(&h)
}

/// Writes one record: `payload` sent from `src` to `dst` at `at` (the
/// record's timestamp, counted from the Unix epoch: pass a time since the
/// capture began to get relative times). Addresses of mixed families are
/// written as IPv6 (IPv4-mapped). A payload too large for one IP packet is
/// an `InvalidInput` error (no UDP datagram is that large).
pub fn write_record(
    out: &mut impl Write,
    at: Duration,
    src: SocketAddr,
    dst: SocketAddr,
    payload: &[u8],
) -> io::Result<()> {
    let packet = ip_udp_packet(src, dst, payload)?;
    let len = u32::try_from(packet.len()).map_err(|_| too_large())?;
    let secs = u32::try_from(at.as_secs()).unwrap_or(u32::MAX);
    let mut r = Vec::with_capacity(16 + packet.len());
    r.extend_from_slice(&secs.to_le_bytes());
    r.extend_from_slice(&at.subsec_micros().to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&packet);
    out.write_all(&r)
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "datagram too large for one IP packet",
    )
}

/// The IP packet carrying `payload` from `src` to `dst` over UDP.
fn ip_udp_packet(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> io::Result<Vec<u8>> {
    let udp_len = u16::try_from(UDP_HEADER + payload.len()).map_err(|_| too_large())?;
    let mut udp = Vec::with_capacity(usize::from(udp_len));
    udp.extend_from_slice(&src.port().to_be_bytes());
    udp.extend_from_slice(&dst.port().to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = u16::try_from(IPV4_HEADER + udp.len()).map_err(|_| too_large())?;
            let mut p = Vec::with_capacity(usize::from(total));
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&total.to_be_bytes());
            // Identification 0, don't fragment, TTL 64, UDP, checksum below.
            p.extend_from_slice(&[0, 0, 0x40, 0, 64, PROTO_UDP, 0, 0]);
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            let sum = internet_checksum(&[&p]);
            p[10..12].copy_from_slice(&sum.to_be_bytes());
            p.extend_from_slice(&udp);
            Ok(p)
        }
        (s, d) => {
            let s = match s {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            let d = match d {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            // RFC 8200 §8.1 pseudo-header: addresses, length, next header.
            let mut pseudo = Vec::with_capacity(40);
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&u32::from(udp_len).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, PROTO_UDP]);
            let sum = match internet_checksum(&[&pseudo, &udp]) {
                0 => 0xffff,
                s => s,
            };
            udp[6..8].copy_from_slice(&sum.to_be_bytes());
            let mut p = Vec::with_capacity(IPV6_HEADER + udp.len());
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&udp_len.to_be_bytes());
            p.extend_from_slice(&[PROTO_UDP, 64]);
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&udp);
            Ok(p)
        }
    }
}

/// The Internet checksum (RFC 1071) of the concatenation of `parts`, each
/// of even length but possibly the last.
fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(u16::from_be_bytes([*last, 0]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn ipv4_record_layout_and_checksum() {
        let src = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 1), 4433));
        let dst = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 1), 50_000));
        let mut out = Vec::new();
        write_header(&mut out).expect("vec");
        write_record(
            &mut out,
            Duration::from_micros(1_500_002),
            src,
            dst,
            b"hello",
        )
        .expect("vec");
        assert_eq!(out.len(), 24 + 16 + 20 + 8 + 5);
        assert_eq!(&out[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(out[20], 101);
        let r = &out[24..];
        assert_eq!(u32::from_le_bytes(r[0..4].try_into().expect("4")), 1);
        assert_eq!(u32::from_le_bytes(r[4..8].try_into().expect("4")), 500_002);
        assert_eq!(u32::from_le_bytes(r[8..12].try_into().expect("4")), 33);
        let ip = &r[16..];
        // A correct header checksums to zero.
        assert_eq!(internet_checksum(&[&ip[..20]]), 0);
        assert_eq!(&ip[20..22], &4433u16.to_be_bytes());
        assert_eq!(&ip[22..24], &50_000u16.to_be_bytes());
        assert_eq!(&ip[24..26], &13u16.to_be_bytes());
        assert_eq!(&ip[28..], b"hello");
    }

    #[test]
    fn ipv6_udp_checksum_verifies_and_oversize_is_an_error() {
        let src = SocketAddr::from((Ipv6Addr::LOCALHOST, 1));
        let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, 2));
        let p = ip_udp_packet(src, dst, b"odd").expect("fits");
        assert_eq!(p[0] >> 4, 6);
        let udp = &p[40..];
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[8..40]);
        pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, PROTO_UDP]);
        assert_eq!(internet_checksum(&[&pseudo, udp]), 0);
        let big = vec![0u8; 70_000];
        let err = ip_udp_packet(src, dst, &big).expect_err("too large");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
