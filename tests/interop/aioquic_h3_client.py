#!/usr/bin/env python3
"""HTTP/3 client built on aioquic's public API (H3Connection over asyncio).

Why it exists: `artq serve` negotiates ALPN "h3"; an independent HTTP/3 stack
(aioquic's QUIC, TLS and QPACK, none of them shared with artq or quinn) must
be able to download from it byte-exact. This is the thinnest client on top of
aioquic's H3Connection, so a failed download points at the server. It is
proven against the quinn + h3 reference server in harness_selfcheck.rs.

Request: one ``GET`` on a client bidirectional stream (HEADERS with
``:method``, ``:scheme``, ``:authority``, ``:path``, ``user-agent``; FIN).
Response: HEADERS (``:status``, optional ``content-length``) then DATA
until FIN.

Usage::

    aioquic_h3_client.py [--insecure] [--timeout S] [-o FILE] https://HOST:PORT/path

On a 200 response with a complete body (exactly ``content-length`` bytes when
the server sends one) it writes the body to FILE (or stdout), prints one
summary line to stderr (``received N bytes in T s: G Mbit/s``, the shape of
`artq get`) and exits 0. Exit codes: 1 transfer, connection or HTTP error
(any status other than 200), 2 bad usage, 3 timeout. A failed or timed-out
download removes the partial -o file.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import time
from typing import BinaryIO
from urllib.parse import urlsplit

import client_cli
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamReset

USER_AGENT = b"artq-interop aioquic-h3"


class H3Error(Exception):
    """A download that did not complete (bad status, reset, closed connection)."""


class _Response:
    """One in-flight response: status, where the body goes, who waits for FIN."""

    def __init__(self, sink: BinaryIO, done: asyncio.Future[int]) -> None:
        self.sink = sink
        self.done = done
        self.status: int | None = None
        self.content_length: int | None = None
        self.received = 0

    def fail(self, message: str) -> None:
        if not self.done.done():
            self.done.set_exception(H3Error(message))

    def finish(self) -> None:
        if self.done.done():
            return
        if self.status is None:
            self.fail("stream ended before the response headers")
        elif self.content_length is not None and self.received != self.content_length:
            self.fail(
                f"body has {self.received} bytes, content-length says "
                f"{self.content_length}"
            )
        else:
            self.done.set_result(self.received)


class H3ClientProtocol(QuicConnectionProtocol):
    """Feeds QUIC events to an H3Connection and turns H3 events into responses."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._responses: dict[int, _Response] = {}
        self.closed_by: str | None = None  # why the connection ended, if it did

    async def get(self, authority: str, path: str, sink: BinaryIO) -> int:
        """Sends ``GET path`` and writes a 200 response's body to `sink`."""
        stream_id = self._quic.get_next_available_stream_id()
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._responses[stream_id] = _Response(sink, done)
        self._http.send_headers(
            stream_id=stream_id,
            headers=[
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode("utf-8")),
                (b":path", path.encode("utf-8")),
                (b"user-agent", USER_AGENT),
            ],
            end_stream=True,
        )
        self.transmit()
        return await done

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamReset):
            response = self._responses.get(event.stream_id)
            if response is not None:
                response.fail(
                    f"server reset stream {event.stream_id} with error code "
                    f"{event.error_code} after {response.received} body bytes"
                )
        elif isinstance(event, ConnectionTerminated):
            self.closed_by = (
                f"error code {event.error_code} ({event.error_code:#x}), frame type "
                f"{event.frame_type}, reason {event.reason_phrase!r}"
            )
            for response in self._responses.values():
                response.fail(
                    f"connection closed (error code {event.error_code}, reason "
                    f"{event.reason_phrase!r}) after {response.received} body bytes"
                )
        for h3_event in self._http.handle_event(event):
            self._h3_event_received(h3_event)

    def _h3_event_received(self, event: H3Event) -> None:
        if not isinstance(event, (HeadersReceived, DataReceived)):
            return
        response = self._responses.get(event.stream_id)
        if response is None or response.done.done():
            return
        if isinstance(event, HeadersReceived):
            if response.status is None:
                self._on_headers(response, event)
            # A second HEADERS is trailers: nothing to check.
        else:
            if response.status is None:
                response.fail("DATA before the response headers")
                return
            try:
                response.sink.write(event.data)
            except OSError as err:
                response.fail(f"cannot write output: {err}")
                return
            response.received += len(event.data)
        if event.stream_ended and not response.done.done():
            response.finish()

    def _on_headers(self, response: _Response, event: HeadersReceived) -> None:
        headers = dict(event.headers)
        status = headers.get(b":status", b"").decode("ascii", "replace")
        if not status.isdigit():
            response.fail(f"response has no valid :status ({status!r})")
            return
        response.status = int(status)
        if response.status != 200:
            response.fail(f"HTTP status {response.status}")
            return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                response.content_length = int(length)
            except ValueError:
                response.fail(f"bad content-length {length!r}")


async def download(args: argparse.Namespace, sink: BinaryIO) -> tuple[int, float]:
    """Connects, fetches one URL, and returns (bytes, seconds from request)."""
    host, port, path = client_cli.parse_url(args.url)
    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    authority = urlsplit(args.url).netloc
    created: list[H3ClientProtocol] = []

    def create_protocol(*a, **kw) -> H3ClientProtocol:
        created.append(H3ClientProtocol(*a, **kw))
        return created[-1]

    try:
        async with connect(
            host, port, configuration=configuration, create_protocol=create_protocol
        ) as protocol:
            assert isinstance(protocol, H3ClientProtocol)
            start = time.monotonic()
            received = await protocol.get(authority, path, sink)
            elapsed = time.monotonic() - start
    except ConnectionError as err:
        # aioquic raises a bare ConnectionError when the handshake fails; the
        # peer's CONNECTION_CLOSE says why (0x100 + TLS alert for TLS errors).
        why = created[-1].closed_by if created else None
        if why is None:
            raise
        raise H3Error(f"connection closed during the handshake: {why}") from err
    return received, elapsed


def main(argv: list[str] | None = None) -> int:
    return client_cli.main(__doc__, download, (H3Error,), argv)


if __name__ == "__main__":
    sys.exit(main())
