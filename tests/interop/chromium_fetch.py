#!/usr/bin/env python3
"""Loads a page in unmodified headless Chromium over HTTP/3 and prints the
SHA-256 the page computed of a file it fetched.

Why it exists: a browser is the client that matters most to a CDN, and the
one least like a test client (its own QUIC stack, ML-KEM key shares, GREASE,
chaos-protected ClientHellos, extra requests such as /favicon.ico). The
harness proves `artq serve` against it by serving tests/interop/sha256_page.html
and a seeded file: the page fetches the file, hashes it with crypto.subtle and
publishes the digest; the Rust test compares it with the file's own hash.

How Chromium is driven (chromium_cdp.py, shared with the edge tests' live
player driver): a fresh profile in a temp dir, Chromium's DevTools
protocol over --remote-debugging-pipe (fds 3 and 4: no port, no extra
package), one new tab navigated to PAGE_URL, then window.artqResult polled
with Runtime.evaluate until the page publishes it or the deadline passes.
QUIC is forced for the origin (--origin-to-force-quic-on) and the server's
self-signed certificate is accepted by its key's SPKI hash
(--ignore-certificate-errors-spki-list); everything that would reach the
network in the background is switched off. The page reports the protocol
Chromium used (PerformanceResourceTiming.nextHopProtocol); anything other
than --protocol (default h3) for the page or the file is an error, so a
success proves HTTP/3.

Usage::

    chromium_fetch.py [--chromium BIN] [--spki B64] [--origin HOST:PORT]
                      [--timeout S] [--netlog FILE] [--protocol P] PAGE_URL

On success prints the hex digest on stdout, and one line
``result: {json}`` (the page's report: bytes, status, ms, protocols) on
stderr, and exits 0. Exit codes: 1 the page failed (navigation error, HTTP
error, wrong protocol, no digest), 2 bad usage, 3 timeout, 4 Chromium did not
start or died. Errors are explained on stderr, with Chromium's log tail and,
with --netlog, the QUIC connection closes Chromium recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from urllib.parse import urlsplit

from chromium_cdp import (
    EXIT_BROWSER,
    EXIT_PAGE,
    DriverError,
    chromium_flags,
    load_page,
    report_failure,
    start_chromium,
    stop_chromium,
)


def check(result: dict, protocol: str) -> str:
    """The digest if the page's result is a success over `protocol`; else raises."""
    if result.get("error"):
        raise DriverError(EXIT_PAGE, f"the page failed: {result['error']}")
    digest = result.get("sha256")
    if not isinstance(digest, str) or len(digest) != 64:
        raise DriverError(EXIT_PAGE, f"the page published no SHA-256: {result}")
    for what in ("page_protocol", "file_protocol"):
        if protocol and result.get(what) != protocol:
            raise DriverError(
                EXIT_PAGE,
                f"{what.replace('_', ' ')} was {result.get(what)!r}, expected {protocol!r}: {result}",
            )
    return digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="https://HOST:PORT/page.html[#/file]")
    parser.add_argument("--chromium", default=os.environ.get("ARTQ_CHROMIUM") or "chromium",
                        help="Chromium binary (default $ARTQ_CHROMIUM, else chromium on PATH)")
    parser.add_argument("--spki", help="base64 SHA-256 of the server key's SPKI to accept")
    parser.add_argument("--origin", help="HOST:PORT to force QUIC on (default the URL's)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="give up after this many seconds")
    parser.add_argument("--netlog", help="write Chromium's netlog here (and summarize it on failure)")
    parser.add_argument("--protocol", default="h3",
                        help="required nextHopProtocol of page and file ('' for any)")
    args = parser.parse_args(argv)
    parts = urlsplit(args.url)
    if parts.scheme != "https" or not parts.hostname or parts.port is None:
        parser.error("URL must be https://HOST:PORT/...")
    if args.origin is None:
        args.origin = parts.netloc
    if not args.timeout > 0:
        parser.error("--timeout must be positive")
    binary = shutil.which(args.chromium)
    if binary is None:
        print(f"error: Chromium not found ({args.chromium!r}); install it "
              "(Debian: apt-get install chromium) or pass --chromium", file=sys.stderr)
        return EXIT_BROWSER

    deadline = time.monotonic() + args.timeout
    with tempfile.TemporaryDirectory(prefix="artq-chromium-") as profile:
        log_path = os.path.join(profile, "chromium.log")
        flags = chromium_flags(os.path.join(profile, "profile"), origin=args.origin,
                               spki=args.spki, netlog=args.netlog)
        proc = None
        devtools = None
        code = 0
        message = ""
        result: dict = {}
        try:
            proc, devtools = start_chromium(binary, flags, log_path)
            result = load_page(devtools, args.url, deadline)
            digest = check(result, args.protocol)
        except DriverError as err:
            code, message = err.code, str(err)
            if proc is not None and proc.poll() is not None:
                code = EXIT_BROWSER
                message += f" (Chromium exited with status {proc.returncode})"
        finally:
            if proc is not None:
                stop_chromium(proc, devtools)
        if code == 0:
            print(digest)
            print(f"result: {json.dumps(result, sort_keys=True)}", file=sys.stderr)
            return 0
        print(f"error: {message}", file=sys.stderr)
        if result:
            print(f"result: {json.dumps(result, sort_keys=True)}", file=sys.stderr)
        report_failure(binary, flags, args.url, args.netlog, log_path)
        return code


if __name__ == "__main__":
    sys.exit(main())
