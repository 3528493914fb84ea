#!/usr/bin/env python3
"""Shows what an HTTP/3 peer's first QUIC flight looks like to a server.

Why it exists: a QUIC server that works with one client can still fail with
another whose first flight differs: a ClientHello larger than one packet
(post-quantum key shares), CRYPTO frames out of order and interleaved with
PING/PADDING (Chromium's "chaos protection"), skipped packet numbers, an empty
source connection ID, GREASE everywhere. This tool lets an artq developer see
exactly that for the harness's peers, without a server: it listens on a UDP
port on 127.0.0.1, points the chosen client at it, decrypts the client's
Initial packets (their keys derive from the client's destination connection
ID, RFC 9001 section 5.2), reassembles the ClientHello and prints the
datagrams, the frames of each Initial packet, and the ClientHello's groups,
key shares, ALPN and QUIC transport parameters. Nothing is answered, so the
client retransmits and gives up; its failure is expected.

Usage (the venv python, which has aioquic; peers as for the interop tests)::

    first_flight.py [--peer chromium|quic-go|aioquic] [--seconds S]

chromium runs tests/interop/chromium_fetch.py ($ARTQ_CHROMIUM or chromium on
PATH), quic-go runs $ARTQ_H3_CLIENT (default target/interop/h3client), aioquic
runs tests/interop/aioquic_h3_client.py.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

from aioquic.buffer import Buffer
from aioquic.quic.crypto import CryptoPair
from aioquic.quic.packet import QuicPacketType, pull_quic_header

GROUPS = {
    0x001D: "x25519",
    0x0017: "secp256r1",
    0x0018: "secp384r1",
    0x0019: "secp521r1",
    0x11EB: "SecP256r1MLKEM768",
    0x11EC: "X25519MLKEM768",
    0x11ED: "SecP384r1MLKEM1024",
    0x001E: "x448",
    0x6399: "X25519Kyber768Draft00",
}
EXTENSIONS = {
    0: "server_name",
    5: "status_request",
    11: "ec_point_formats",
    23: "extended_master_secret",
    50: "signature_algorithms_cert",
    0xFF01: "renegotiation_info",
    10: "supported_groups",
    13: "signature_algorithms",
    16: "alpn",
    18: "signed_certificate_timestamp",
    27: "compress_certificate",
    41: "pre_shared_key",
    43: "supported_versions",
    45: "psk_key_exchange_modes",
    51: "key_share",
    57: "quic_transport_parameters",
    17513: "application_settings(old)",
    17613: "application_settings",
    0xFE0D: "encrypted_client_hello",
    0xCA34: "trust_anchors(draft)",
}
TRANSPORT_PARAMETERS = {
    0x00: "original_destination_connection_id",
    0x01: "max_idle_timeout",
    0x03: "max_udp_payload_size",
    0x04: "initial_max_data",
    0x05: "initial_max_stream_data_bidi_local",
    0x06: "initial_max_stream_data_bidi_remote",
    0x07: "initial_max_stream_data_uni",
    0x08: "initial_max_streams_bidi",
    0x09: "initial_max_streams_uni",
    0x0A: "ack_delay_exponent",
    0x0B: "max_ack_delay",
    0x0C: "disable_active_migration",
    0x0E: "active_connection_id_limit",
    0x0F: "initial_source_connection_id",
    0x20: "max_datagram_frame_size",
    0x2AB2: "grease_quic_bit",
    0x11: "version_information",
    0x3127: "google_connection_options",
    0x4752: "user_agent(google)",
    0x71: "google_version(old)",
    0xFF73DB: "version_information(draft)",
    0xFF04DE1B: "min_ack_delay",
}


def grease(v: int) -> bool:
    return (v & 0x0F0F) == 0x0A0A and (v >> 8) == (v & 0xFF)


def name(table: dict[int, str], v: int) -> str:
    if v in table:
        return table[v]
    if grease(v):
        return f"GREASE({v:#06x})"
    return f"{v:#x}"


def frames(payload: bytes) -> list[str]:
    """One short description per frame of an Initial packet."""
    buf = Buffer(data=payload)
    out: list[str] = []
    padding = 0
    while not buf.eof():
        kind = buf.pull_uint_var()
        if kind == 0x00:
            padding += 1
            continue
        if padding:
            out.append(f"PADDING x{padding}")
            padding = 0
        if kind == 0x01:
            out.append("PING")
        elif kind == 0x06:
            offset = buf.pull_uint_var()
            length = buf.pull_uint_var()
            buf.pull_bytes(length)
            out.append(f"CRYPTO [{offset}, {offset + length})")
        elif kind in (0x02, 0x03):
            buf.pull_uint_var()
            buf.pull_uint_var()
            count = buf.pull_uint_var()
            buf.pull_uint_var()
            for _ in range(count):
                buf.pull_uint_var()
                buf.pull_uint_var()
            if kind == 0x03:
                for _ in range(3):
                    buf.pull_uint_var()
            out.append("ACK")
        else:
            out.append(f"frame {kind:#x} (stop parsing)")
            break
    if padding:
        out.append(f"PADDING x{padding}")
    return out


def crypto_data(payload: bytes, into: dict[int, bytes]) -> None:
    buf = Buffer(data=payload)
    while not buf.eof():
        kind = buf.pull_uint_var()
        if kind in (0x00, 0x01):
            continue
        if kind != 0x06:
            return
        offset = buf.pull_uint_var()
        length = buf.pull_uint_var()
        into[offset] = buf.pull_bytes(length)


def client_hello(stream: bytes) -> list[str]:
    """A summary of the ClientHello at the start of `stream`."""
    buf = Buffer(data=stream)
    if buf.pull_uint8() != 1:
        return ["not a ClientHello"]
    length = int.from_bytes(buf.pull_bytes(3), "big")
    lines = [f"ClientHello: {length + 4} bytes"]
    buf.pull_bytes(2 + 32)
    buf.pull_bytes(buf.pull_uint8())
    suites = buf.pull_bytes(buf.pull_uint16())
    lines.append(
        "  cipher_suites: "
        + ", ".join(name({}, int.from_bytes(suites[i:i + 2], "big")) for i in range(0, len(suites), 2))
    )
    buf.pull_bytes(buf.pull_uint8())
    end = buf.pull_uint16() + buf.tell()
    order = []
    while buf.tell() < end:
        ext = buf.pull_uint16()
        data = buf.pull_bytes(buf.pull_uint16())
        order.append(f"{name(EXTENSIONS, ext)}({len(data)})")
        b = Buffer(data=data)
        if ext == 10:
            groups = b.pull_bytes(b.pull_uint16())
            lines.append("  supported_groups: " + ", ".join(
                name(GROUPS, int.from_bytes(groups[i:i + 2], "big")) for i in range(0, len(groups), 2)))
        elif ext == 51:
            shares = []
            total = b.pull_uint16()
            stop = b.tell() + total
            while b.tell() < stop:
                group = b.pull_uint16()
                key = b.pull_bytes(b.pull_uint16())
                shares.append(f"{name(GROUPS, group)} ({len(key)} bytes)")
            lines.append("  key_share: " + ", ".join(shares))
        elif ext == 16:
            protos = []
            stop = b.pull_uint16()
            while b.tell() < stop + 2:
                protos.append(b.pull_bytes(b.pull_uint8()).decode("ascii", "replace"))
            lines.append("  alpn: " + ", ".join(protos))
        elif ext == 13:
            algs = b.pull_bytes(b.pull_uint16())
            lines.append("  signature_algorithms: " + ", ".join(
                f"{int.from_bytes(algs[i:i + 2], 'big'):#06x}" for i in range(0, len(algs), 2)))
        elif ext == 57:
            params = []
            while not b.eof():
                pid = b.pull_uint_var()
                value = b.pull_bytes(b.pull_uint_var())
                shown = value.hex() if len(value) > 8 or pid in (0x0F, 0x11) else ""
                if not shown:
                    try:
                        shown = str(Buffer(data=value).pull_uint_var()) if value else "(empty)"
                    except Exception:
                        shown = value.hex()
                label = (f"GREASE({pid:#x})" if pid >= 27 and (pid - 27) % 31 == 0
                         else name(TRANSPORT_PARAMETERS, pid))
                params.append(f"    {label}: {shown}")
            lines.append("  quic_transport_parameters:")
            lines.extend(params)
    lines.insert(1, "  extensions (in order): " + ", ".join(order))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--peer", choices=("chromium", "quic-go", "aioquic"), default="chromium")
    parser.add_argument("--seconds", type=float, default=4.0, help="how long to listen")
    args = parser.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    url = f"https://127.0.0.1:{sock.getsockname()[1]}/page.html"
    here = os.path.dirname(os.path.abspath(__file__))
    timeout = str(int(args.seconds + 5))
    if args.peer == "chromium":
        command = [sys.executable, os.path.join(here, "chromium_fetch.py"), "--timeout", timeout, url]
    elif args.peer == "quic-go":
        client = os.environ.get("ARTQ_H3_CLIENT") or os.path.join(
            here, "..", "..", "target", "interop", "h3client")
        command = [client, "-insecure", "-timeout", timeout, "-o", os.devnull, url]
    else:
        command = [sys.executable, os.path.join(here, "aioquic_h3_client.py"), "--insecure",
                   "--timeout", timeout, "-o", os.devnull, url]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    datagrams: list[tuple[float, bytes]] = []
    start = None
    deadline = time.monotonic() + args.seconds + 10
    try:
        while time.monotonic() < deadline:
            try:
                data, _ = sock.recvfrom(65536)
            except socket.timeout:
                if start is not None and time.monotonic() - start > args.seconds:
                    break
                continue
            if start is None:
                start = time.monotonic()
            datagrams.append((time.monotonic() - start, data))
    finally:
        child.kill()
        child.wait()
    if not datagrams:
        print(f"{args.peer} sent nothing", file=sys.stderr)
        return 1

    crypto = None
    stream: dict[int, bytes] = {}
    for t, data in datagrams:
        buf = Buffer(data=data)
        print(f"t={t * 1000:7.1f} ms  datagram {len(data)} bytes")
        while not buf.eof():
            start_off = buf.tell()
            if not data[start_off] & 0x80:
                print(f"  {len(data) - start_off} trailing bytes (zero padding or a short-header packet)")
                break
            header = pull_quic_header(buf, host_cid_length=8)
            end_off = start_off + header.packet_length
            if header.packet_type != QuicPacketType.INITIAL:
                print(f"  {header.packet_type.name} packet, {header.packet_length} bytes")
                buf.seek(end_off)
                continue
            if crypto is None:
                crypto = CryptoPair()
                crypto.setup_initial(header.destination_cid, is_client=False, version=header.version)
                print(f"  version {header.version:#x}, DCID {header.destination_cid.hex()}"
                      f" ({len(header.destination_cid)} bytes), SCID {header.source_cid.hex()}"
                      f" ({len(header.source_cid)} bytes), token {len(header.token)} bytes")
            try:
                _, payload, pn = crypto.decrypt_packet(
                    data[start_off:end_off], buf.tell() - start_off, 0)
            except Exception as err:  # a retransmission with another key: skip
                print(f"  Initial packet ({header.packet_length} bytes): cannot decrypt: {err}")
                buf.seek(end_off)
                continue
            print(f"  Initial pn {pn}, {header.packet_length} bytes: " + ", ".join(frames(payload)))
            crypto_data(payload, stream)
            buf.seek(end_off)

    joined = b""
    for offset in sorted(stream):
        if offset <= len(joined):
            joined = joined[:offset] + stream[offset] + joined[offset + len(stream[offset]):]
    print("\n".join(client_hello(joined)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
