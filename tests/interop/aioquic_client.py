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

    aioquic_client.py [--insecure] [--timeout S] [-o FILE] https://HOST:PORT/path

On success it writes the body to FILE (or stdout), prints one summary line to
stderr (``received N bytes in T s: G Mbit/s``, the same shape as `artq get`),
and exits 0. Exit codes: 1 transfer or connection error, 2 bad usage, 3 timeout.
A failed or timed-out download removes the partial -o file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import ssl
import sys
import time
from typing import BinaryIO
from urllib.parse import urlsplit

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
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3


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


def parse_url(url: str) -> tuple[str, int, str]:
    """Splits an https URL into (host, port, path); raises ValueError if bad."""
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise ValueError(f"URL scheme must be https, got {parts.scheme!r}")
    if not parts.hostname:
        raise ValueError("URL has no host")
    port = parts.port if parts.port is not None else 443
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    if any(c in path for c in "\r\n"):
        raise ValueError("URL path contains a line break")
    return parts.hostname, port, path


async def download(args: argparse.Namespace, sink: BinaryIO) -> tuple[int, float]:
    """Connects, fetches one path, and returns (bytes, seconds from request)."""
    host, port, path = parse_url(args.url)
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[ALPN])
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    async with connect(
        host, port, configuration=configuration, create_protocol=HqClientProtocol
    ) as protocol:
        assert isinstance(protocol, HqClientProtocol)
        start = time.monotonic()
        received = await protocol.get(path, sink)
        elapsed = time.monotonic() - start
    return received, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="https://HOST:PORT/path")
    parser.add_argument("-o", "--output", help="write the body here (default stdout)")
    parser.add_argument(
        "--insecure", action="store_true", help="do not verify the server certificate"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="give up after this many seconds"
    )
    args = parser.parse_args(argv)
    try:
        parse_url(args.url)
    except ValueError as err:
        parser.error(str(err))
    if not args.timeout > 0:
        parser.error("--timeout must be positive")

    try:
        sink = open(args.output, "wb") if args.output else sys.stdout.buffer
    except OSError as err:
        print(f"error: cannot open output: {err}", file=sys.stderr)
        return EXIT_ERROR

    code = EXIT_ERROR
    try:
        with sink if args.output else contextlib.nullcontext():
            received, elapsed = asyncio.run(
                asyncio.wait_for(download(args, sink), timeout=args.timeout)
            )
        mbps = received * 8 / elapsed / 1e6 if elapsed > 0 else float("inf")
        print(
            f"received {received} bytes in {elapsed:.3f} s: {mbps:.1f} Mbit/s",
            file=sys.stderr,
        )
        code = 0
    except (asyncio.TimeoutError, TimeoutError):
        print(f"error: timed out after {args.timeout} s", file=sys.stderr)
        code = EXIT_TIMEOUT
    except (HqError, ConnectionError, OSError) as err:
        print(f"error: {str(err) or type(err).__name__}", file=sys.stderr)
        code = EXIT_ERROR
    finally:
        if code != 0 and args.output:
            try:
                os.remove(args.output)
            except OSError:
                pass
    return code


if __name__ == "__main__":
    sys.exit(main())
