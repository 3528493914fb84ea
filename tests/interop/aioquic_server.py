#!/usr/bin/env python3
"""hq-interop file server built on aioquic's public API, optionally with Retry.

Why it exists: `artq get` must follow a Retry from a server it did not write
(issue 15, bug 5: it timed out against aioquic with ``retry=True``). aioquic
is an independent QUIC stack whose ``serve(..., retry=True)`` validates every
client address with a Retry packet and its own tokens, so a byte-exact
download through it checks artq's client side of Retry: the integrity tag,
the new Destination Connection ID and Initial keys, the token in the next
Initials, and the retry_source_connection_id transport parameter.

Protocol (hq-interop, HTTP/0.9 over QUIC with ALPN "hq-interop"): a client
opens a bidirectional stream and sends ``GET /path\\r\\n`` and FIN; the server
answers with the file's bytes and FIN, or resets the stream when the path is
not a file under the root.

Usage::

    aioquic_server.py --root DIR --cert PEM --key PEM [--retry] [--resumption]
                      [--listen 127.0.0.1:0]

``--resumption`` issues session tickets and accepts resumption and 0-RTT
(aioquic accepts early data with every ticket it issues); tickets are kept in
memory and single-use, as in aioquic's own examples/http3_server.py. It checks
`artq get --reconnect`'s client side: tickets kept, sessions resumed,
requests sent in 0-RTT packets.

Prints ``listening on IP:PORT`` on stdout once bound (the contract the tests'
``spawn_listening`` waits for), then serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent, StreamDataReceived

ALPN = "hq-interop"
# Requests longer than this are refused: a request line is a path, not a body.
MAX_REQUEST = 4096
CHUNK = 64 * 1024


def resolve(root: str, request: bytes) -> str | None:
    """The file a ``GET /path\\r\\n`` request names under root, if any."""
    line = request.split(b"\r\n", 1)[0].split(b"\n", 1)[0]
    if not line.startswith(b"GET /"):
        return None
    path = line[4:].decode("utf-8", "replace")
    full = os.path.realpath(os.path.join(root, path.lstrip("/")))
    if not full.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(full):
        return None
    return full


class HqServerProtocol(QuicConnectionProtocol):
    """Collects each request stream's bytes and answers at FIN."""

    def __init__(self, *args, root: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._root = root
        self._requests: dict[int, bytearray] = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        if not isinstance(event, StreamDataReceived):
            return
        buf = self._requests.setdefault(event.stream_id, bytearray())
        buf.extend(event.data)
        if len(buf) > MAX_REQUEST:
            self._quic.reset_stream(event.stream_id, 0x10C)
            del self._requests[event.stream_id]
        elif event.end_stream:
            request = bytes(self._requests.pop(event.stream_id))
            path = resolve(self._root, request)
            if path is None:
                self._quic.reset_stream(event.stream_id, 0x10C)
            else:
                with open(path, "rb") as f:
                    while True:
                        chunk = f.read(CHUNK)
                        if not chunk:
                            break
                        self._quic.send_stream_data(event.stream_id, chunk)
                self._quic.send_stream_data(event.stream_id, b"", end_stream=True)
        self.transmit()


class SessionTicketStore:
    """Single-use, in-memory session tickets (a ticket is removed when used)."""

    def __init__(self) -> None:
        self.tickets: dict[bytes, object] = {}

    def add(self, ticket) -> None:
        self.tickets[ticket.ticket] = ticket

    def pop(self, label: bytes):
        return self.tickets.pop(label, None)


def resumption_options(enabled: bool) -> dict:
    """serve()'s keyword arguments for session tickets, when enabled."""
    if not enabled:
        return {}
    store = SessionTicketStore()
    return {"session_ticket_fetcher": store.pop, "session_ticket_handler": store.add}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="directory to serve")
    parser.add_argument("--cert", required=True, help="PEM certificate")
    parser.add_argument("--key", required=True, help="PEM private key")
    parser.add_argument("--listen", default="127.0.0.1:0", help="IP:PORT (port 0 picks one)")
    parser.add_argument("--retry", action="store_true", help="validate clients with Retry")
    parser.add_argument(
        "--resumption", action="store_true", help="issue session tickets, accept 0-RTT"
    )
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    if not os.path.isdir(args.root):
        print(f"--root {args.root}: not a directory", file=sys.stderr)
        return 2

    configuration = QuicConfiguration(is_client=False, alpn_protocols=[ALPN])
    configuration.load_cert_chain(args.cert, args.key)
    server = await serve(
        host,
        int(port),
        configuration=configuration,
        create_protocol=lambda *a, **kw: HqServerProtocol(*a, root=args.root, **kw),
        retry=args.retry,
        **resumption_options(args.resumption),
    )
    sock = server._transport.get_extra_info("socket")  # the bound port
    bound = sock.getsockname() if sock is not None else (host, int(port))
    ip = bound[0] if sock is None or sock.family == socket.AF_INET else f"[{bound[0]}]"
    print(f"listening on {ip}:{bound[1]}", flush=True)
    await asyncio.Future()  # serve until killed
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except KeyboardInterrupt:
        sys.exit(0)
