#!/usr/bin/env python3
"""hq-interop client built on aioquic's public API.

Why it exists: artq's receiver-side claims ("the receiver is never modified",
DESIGN.md) are only worth something if an independent QUIC stack can download
from `artq serve`. aioquic is that stack; this script is the thinnest possible
client on top of it, so a failed download points at the server, not at us.

Protocol (hq-interop, i.e. HTTP/0.9 over QUIC with ALPN "hq-interop"): open a
client-initiated bidirectional stream, send ``GET /path\\r\\n`` and FIN, read
the response bytes until the server's FIN.

Usage::

    aioquic_client.py [--insecure] [--timeout S] [--negotiate-v2] [-o FILE] https://HOST:PORT/path

On success it writes the body to FILE (or stdout), prints one summary line to
stderr (``received N bytes in T s: G Mbit/s``, the same shape as `artq get`),
and exits 0. Exit codes: 1 transfer or connection error, 2 bad usage, 3 timeout.
A failed or timed-out download removes the partial -o file.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import time
from typing import BinaryIO

import client_cli
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import (
    ConnectionTerminated,
    QuicEvent,
    StreamDataReceived,
    StreamReset,
)

ALPN = "hq-interop"


class HqError(Exception):
    """A download that did not complete (reset stream, closed connection)."""


class _Transfer:
    """One in-flight response: where its bytes go and who waits for its FIN."""

    def __init__(self, sink: BinaryIO, done: asyncio.Future[int]) -> None:
        self.sink = sink
        self.done = done
        self.received = 0


class HqClientProtocol(QuicConnectionProtocol):
    """A QuicConnectionProtocol that turns stream events into hq responses.

    aioquic's default stream readers treat a reset stream as "no event" and a
    closed connection as end of stream, which would turn a broken transfer into
    a short file or a hang. Overriding ``quic_event_received`` (the documented
    hook) lets us fail loudly instead.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._transfers: dict[int, _Transfer] = {}

    async def get(self, path: str, sink: BinaryIO) -> int:
        """Requests `path` and writes the response to `sink`; returns its size."""
        _reader, writer = await self.create_stream()
        stream_id = writer.get_extra_info("stream_id")
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._transfers[stream_id] = _Transfer(sink, done)
        writer.write(f"GET {path}\r\n".encode("utf-8"))
        writer.write_eof()
        return await done

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived):
            transfer = self._transfers.get(event.stream_id)
            if transfer is None or transfer.done.done():
                return
            try:
                transfer.sink.write(event.data)
            except OSError as err:
                transfer.done.set_exception(HqError(f"cannot write output: {err}"))
                return
            transfer.received += len(event.data)
            if event.end_stream:
                transfer.done.set_result(transfer.received)
        elif isinstance(event, StreamReset):
            transfer = self._transfers.get(event.stream_id)
            if transfer is not None and not transfer.done.done():
                transfer.done.set_exception(
                    HqError(
                        f"server reset stream {event.stream_id} with error code "
                        f"{event.error_code} after {transfer.received} bytes"
                    )
                )
        elif isinstance(event, ConnectionTerminated):
            for transfer in self._transfers.values():
                if not transfer.done.done():
                    transfer.done.set_exception(
                        HqError(
                            f"connection closed (error code {event.error_code}, "
                            f"reason {event.reason_phrase!r}) after "
                            f"{transfer.received} bytes"
                        )
                    )


async def download(args: argparse.Namespace, sink: BinaryIO) -> tuple[int, float]:
    """Connects, fetches one path, and returns (bytes, seconds from request)."""
    host, port, path = client_cli.parse_url(args.url)
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[ALPN])
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    client_cli.apply_version_args(args, configuration)
    async with connect(
        host, port, configuration=configuration, create_protocol=HqClientProtocol
    ) as protocol:
        assert isinstance(protocol, HqClientProtocol)
        start = time.monotonic()
        received = await protocol.get(path, sink)
        elapsed = time.monotonic() - start
        client_cli.report_version(protocol._quic)
    return received, elapsed


def main(argv: list[str] | None = None) -> int:
    return client_cli.main(__doc__, download, (HqError,), argv)


if __name__ == "__main__":
    sys.exit(main())
