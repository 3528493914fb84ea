"""The command line shared by the Python download clients.

Why it exists: ``aioquic_client.py`` (hq-interop) and ``aioquic_h3_client.py``
(HTTP/3) differ only in how they download; their arguments, summary line,
exit codes and clean-up of a partial output file are one contract with the
Rust interop tests (the same shape as ``artq get``), kept here once.

Usage from a client script::

    sys.exit(client_cli.main(__doc__, parse_url, download, (MyError,)))

where ``download(args, sink)`` is a coroutine returning ``(bytes, seconds)``.
Exit codes: 0 success, 1 transfer or connection error, 2 bad usage, 3 timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from typing import Awaitable, BinaryIO, Callable
from urllib.parse import urlsplit

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3

QUIC_V1 = 0x00000001
QUIC_V2 = 0x6B3343CF


def apply_version_args(args: argparse.Namespace, configuration) -> None:
    """``--negotiate-v2``: start in v1 and list v2 first among the versions
    the first flight is compatible with, as aioquic's own example client
    does; the server then may answer in v2."""
    if args.negotiate_v2:
        configuration.original_version = QUIC_V1
        configuration.supported_versions = [QUIC_V2, QUIC_V1]


def report_version(quic) -> None:
    """Prints the QUIC version the connection ended up in (stderr), so a
    test can check that negotiation really happened."""
    print(f"quic version: {quic._version:#010x}", file=sys.stderr)


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
    return parts.hostname, port, path


def main(
    doc: str,
    download: Callable[[argparse.Namespace, BinaryIO], Awaitable[tuple[int, float]]],
    errors: tuple[type[BaseException], ...],
    argv: list[str] | None = None,
) -> int:
    """Parses the arguments, runs ``download`` under the timeout, prints the
    summary line and returns the exit code."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("url", help="https://HOST:PORT/path")
    parser.add_argument("-o", "--output", help="write the body here (default stdout)")
    parser.add_argument(
        "--insecure", action="store_true", help="do not verify the server certificate"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="give up after this many seconds"
    )
    parser.add_argument(
        "--negotiate-v2",
        action="store_true",
        help="send a QUIC v1 first flight offering v2 (compatible version "
        "negotiation, RFC 9368) and follow the server to v2 if it switches",
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
    except (*errors, ConnectionError, OSError) as err:
        print(f"error: {str(err) or type(err).__name__}", file=sys.stderr)
        code = EXIT_ERROR
    finally:
        if code != 0 and args.output:
            try:
                os.remove(args.output)
            except OSError:
                pass
    return code
