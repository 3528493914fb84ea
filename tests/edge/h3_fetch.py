#!/usr/bin/env python3
"""Fetches many URLs over one HTTP/3 connection (aioquic) and reports, per
URL, the status, the body's size and SHA-256, and how its stream ended.

Why it exists: the edge tests (crates/artq/tests/edge_origin.rs,
edge_live.rs) need an HTTP/3 client that
- fetches hundreds of small objects cheaply (one process, one connection;
  the quic-go client and `artq get` take one URL per run), to count what
  reaches the origin behind a cache;
- reports any status (502, 504) with the time its response head took;
- tells a stream reset from a clean end, so a truncated body that arrives
  as if complete is caught;
- reads a live stream for a while, keeps its first bytes for inspection,
  and then cancels the request the HTTP/3 way (STOP_SENDING and
  RESET_STREAM with H3_REQUEST_CANCELLED), optionally keeping the
  connection open afterwards (--linger), so a test can watch the edge
  release its origin connection.
Bodies are hashed as they arrive, never kept (only the first --head bytes,
when asked), so memory stays bounded whatever the sizes.

Usage::

    h3_fetch.py [--insecure] [--timeout S] [--concurrency N] [--for S]
                [--abort reset|close] [--head BYTES --head-dir DIR] [--linger S]
                URL [URL ...]

All URLs must have the same https://HOST:PORT. Prints one JSON object per
URL on stdout, in the order given:
  {"url", "status" (null if no head), "content_length" (or null),
   "content_type", "head_ms" (request to response head), "ms" (request to
   end), "bytes", "sha256" (hex of the body received), "end"}
where "end" is "fin" (the stream ended cleanly), "reset" (the server reset
it; "reset_code" gives the code), "cancelled" (--for ran out and the client
cancelled the request, or with --abort close closed the connection;
"cancel_unix" is when, in Unix seconds), "closed" (the connection
closed first; "reason"), or "timeout". With --head, the first BYTES of URL
number i (from 0) are written to DIR/i.head.
Exit codes: 0 when every URL was answered 200 and its stream ended "fin"
with as many bytes as its content-length (or "cancelled" under --for); 1 otherwise
(the lines say why); 2 bad usage; 3 the connection could not be made.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import ssl
import sys
import time
from urllib.parse import urlsplit

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamReset

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONNECT = 3

H3_REQUEST_CANCELLED = 0x10C
USER_AGENT = b"artq-edge-test h3_fetch"


class Fetch:
    """One request's progress; `done` resolves when its stream has ended."""

    def __init__(self, url: str, path: str, head_limit: int) -> None:
        self.url = url
        self.path = path
        self.status: int | None = None
        self.content_length: int | None = None
        self.content_type = ""
        self.bytes = 0
        self.digest = hashlib.sha256()
        self.head = bytearray()
        self.head_limit = head_limit
        self.started = 0.0
        self.head_at: float | None = None
        self.ended_at: float | None = None
        self.end: str | None = None
        self.extra: dict = {}
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def finish(self, end: str, **extra) -> None:
        if self.end is None:
            self.end = end
            self.extra.update(extra)
            self.ended_at = time.monotonic()
        if not self.done.done():
            self.done.set_result(None)

    def report(self) -> dict:
        ms = lambda t: None if t is None else round((t - self.started) * 1000, 1)  # noqa: E731
        out = {
            "url": self.url,
            "status": self.status,
            "content_length": self.content_length,
            "content_type": self.content_type,
            "head_ms": ms(self.head_at),
            "ms": ms(self.ended_at),
            "bytes": self.bytes,
            "sha256": self.digest.hexdigest(),
            "end": self.end or "timeout",
        }
        out.update(self.extra)
        return out

    def complete(self, cancelled_ok: bool) -> bool:
        if self.status != 200:
            return False
        if self.end == "cancelled":
            return cancelled_ok
        return self.end == "fin" and (
            self.content_length is None or self.content_length == self.bytes
        )


class Client(QuicConnectionProtocol):
    """Feeds QUIC events to an H3Connection and H3 events to the fetches."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._fetches: dict[int, Fetch] = {}
        self.closed_reason: str | None = None

    def start(self, authority: str, fetch: Fetch) -> None:
        stream_id = self._quic.get_next_available_stream_id()
        self._fetches[stream_id] = fetch
        fetch.started = time.monotonic()
        self._http.send_headers(
            stream_id=stream_id,
            headers=[
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode("utf-8")),
                (b":path", fetch.path.encode("utf-8")),
                (b"user-agent", USER_AGENT),
            ],
            end_stream=True,
        )
        self.transmit()

    def cancel(self, fetch: Fetch) -> None:
        """Cancels `fetch`'s request: STOP_SENDING, and RESET_STREAM of our side."""
        for stream_id, f in self._fetches.items():
            if f is fetch and fetch.end is None:
                fetch.finish("cancelled", cancel_unix=time.time())
                self._quic.stop_stream(stream_id, H3_REQUEST_CANCELLED)
                try:
                    self._quic.reset_stream(stream_id, H3_REQUEST_CANCELLED)
                except Exception:  # our side already ended with FIN: nothing to reset
                    pass
                self.transmit()

    def close_now(self, fetch: Fetch) -> None:
        """Ends `fetch` by closing the whole connection (H3_NO_ERROR), no reset."""
        fetch.finish("cancelled", cancel_unix=time.time())
        self._quic.close(error_code=0x100, reason_phrase="h3_fetch --abort close")
        self.transmit()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamReset):
            fetch = self._fetches.get(event.stream_id)
            if fetch is not None:
                fetch.finish("reset", reset_code=event.error_code)
        elif isinstance(event, ConnectionTerminated):
            self.closed_reason = (
                f"error code {event.error_code:#x}, frame type {event.frame_type}, "
                f"reason {event.reason_phrase!r}"
            )
            for fetch in self._fetches.values():
                fetch.finish("closed", reason=self.closed_reason)
        for h3_event in self._http.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if not isinstance(event, (HeadersReceived, DataReceived)):
            return
        fetch = self._fetches.get(event.stream_id)
        if fetch is None or fetch.end is not None:
            return
        if isinstance(event, HeadersReceived):
            if fetch.status is None:
                headers = dict(event.headers)
                status = headers.get(b":status", b"").decode("ascii", "replace")
                fetch.status = int(status) if status.isdigit() else -1
                fetch.head_at = time.monotonic()
                fetch.content_type = headers.get(b"content-type", b"").decode("latin-1")
                length = headers.get(b"content-length")
                if length is not None and length.isdigit():
                    fetch.content_length = int(length)
        else:
            data = event.data
            fetch.bytes += len(data)
            fetch.digest.update(data)
            room = fetch.head_limit - len(fetch.head)
            if room > 0:
                fetch.head += data[:room]
        if event.stream_ended:
            fetch.finish("fin")


async def run(args: argparse.Namespace, fetches: list[Fetch], authority: str, host: str,
              port: int) -> None:
    """Connects and runs every fetch, at most --concurrency at once."""
    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    if args.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    async with connect(host, port, configuration=configuration, create_protocol=Client) as client:
        assert isinstance(client, Client)
        slots = asyncio.Semaphore(args.concurrency)

        async def one(fetch: Fetch) -> None:
            async with slots:
                client.start(authority, fetch)
                if args.read_for is not None:
                    try:
                        await asyncio.wait_for(asyncio.shield(fetch.done), args.read_for)
                    except asyncio.TimeoutError:
                        if args.abort == "close":
                            client.close_now(fetch)
                        else:
                            client.cancel(fetch)
                else:
                    await fetch.done

        await asyncio.gather(*(one(f) for f in fetches))
        if args.linger > 0:
            await asyncio.sleep(args.linger)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs="+", metavar="URL", help="https://HOST:PORT/path")
    parser.add_argument("--insecure", action="store_true", help="do not verify the certificate")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once")
    parser.add_argument("--for", dest="read_for", type=float,
                        help="read each response at most this many seconds, then cancel it")
    parser.add_argument("--head", type=int, default=0, help="keep this many first body bytes")
    parser.add_argument("--head-dir", help="write the kept bytes of URL i to DIR/i.head")
    parser.add_argument("--abort", choices=["reset", "close"], default="reset",
                        help="how --for ends a response: cancel its stream (reset), or close "
                        "the whole connection at once (close)")
    parser.add_argument("--linger", type=float, default=0.0,
                        help="keep the connection this many seconds after the last response")
    args = parser.parse_args(argv)
    authorities = {urlsplit(u).netloc for u in args.urls}
    parts = urlsplit(args.urls[0])
    if any(urlsplit(u).scheme != "https" for u in args.urls) or not parts.hostname:
        parser.error("every URL must be https://HOST:PORT/path")
    if len(authorities) != 1:
        parser.error("all URLs must have the same HOST:PORT")
    if args.concurrency < 1 or not args.timeout > 0 or args.head < 0 or args.linger < 0:
        parser.error("--concurrency >= 1, --timeout > 0, --head >= 0, --linger >= 0")
    if args.head and not args.head_dir:
        parser.error("--head needs --head-dir")
    if args.read_for is not None and not args.read_for > 0:
        parser.error("--for must be positive")

    fetches: list[Fetch] = []

    async def bounded() -> None:
        for url in args.urls:
            p = urlsplit(url)
            fetches.append(Fetch(url, (p.path or "/") + (f"?{p.query}" if p.query else ""), args.head))
        await asyncio.wait_for(
            run(args, fetches, parts.netloc, parts.hostname, parts.port or 443), args.timeout
        )

    code = EXIT_OK
    try:
        asyncio.run(bounded())
    except asyncio.TimeoutError:
        print(f"error: not done after {args.timeout:g} s", file=sys.stderr)
        code = EXIT_FAILED
    except (ConnectionError, OSError) as err:
        print(f"error: cannot connect to {parts.netloc}: {err!r}", file=sys.stderr)
        return EXIT_CONNECT
    for i, fetch in enumerate(fetches):
        print(json.dumps(fetch.report(), sort_keys=True))
        if args.head_dir:
            with open(os.path.join(args.head_dir, f"{i}.head"), "wb") as f:
                f.write(fetch.head)
        if not fetch.complete(cancelled_ok=args.read_for is not None):
            code = EXIT_FAILED
    return code


if __name__ == "__main__":
    sys.exit(main())
