#!/usr/bin/env python3
"""Plays a live stream in unmodified headless Chromium with mpegts.js and
prints what the viewer saw (stalls, start-up, playback position, frames).

Why it exists: a CDN edge relaying live HTTP-FLV or MPEG-TS is judged by its
viewers, and the viewer that matters is a browser running a maintained
player. The edge tests (crates/artq/tests/edge_live.rs) serve
tests/edge/live_player.html and mpegts.js from the server under test and
let this driver open it: the page plays the stream for --seconds of wall
time and publishes its measurements; this driver adds the protocol Chromium
used for the stream and checks it.

How: Chromium is started and driven by tests/interop/chromium_cdp.py (the
module chromium_fetch.py uses), with muted autoplay allowed
(--autoplay-policy=no-user-gesture-required). For an https page QUIC is
forced on its origin (or --origin) and the key with SPKI hash --spki is
accepted. The stream's request never completes, so resource timing cannot
name its protocol: the driver enables DevTools' Network domain on the tab
and reads the protocol of the stream's Network.responseReceived (and its
Network.loadingFailed, if any). --protocol (default h3; 'http/1.1' for a
plain-HTTP run through nginx) must be what the page, mpegts.js and the
stream came over.

Usage::

    live_player.py [--chromium BIN] [--spki B64] [--origin HOST:PORT]
                   [--seconds N] [--type flv|mpegts] [--protocol P]
                   [--timeout S] [--netlog FILE] PAGE_URL STREAM_URL

PAGE_URL is live_player.html's URL; STREAM_URL the stream's, absolute or
relative to the page. Prints one line ``result: {json}`` on stdout (the
page's report, plus stream_protocol, stream_status and stream_failure from
DevTools) and exits 0 when the player played (the video fired `playing`)
over the right protocol. Exit codes: 1 the player did not play, or the
protocol was wrong (the result line is still printed when the page made
one), 2 bad usage, 3 timeout, 4 Chromium did not start or died. Reasons go
to stderr, with Chromium's log tail and, with --netlog, its QUIC closes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from urllib.parse import urlencode, urljoin, urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))

from chromium_cdp import (  # noqa: E402  (after the path set-up above)
    EXIT_BROWSER,
    EXIT_PAGE,
    DriverError,
    chromium_flags,
    report_failure,
    open_tab,
    start_chromium,
    stop_chromium,
    wait_for_result,
)

# DevTools events the driver reads: the stream's response head and failure.
WATCHED_EVENTS = frozenset({"Network.responseReceived", "Network.loadingFailed"})

# Margin beyond --seconds for Chromium's start, the page's load and the
# report, when --timeout is not given.
DEFAULT_MARGIN_S = 40.0


def stream_facts(events: list[dict], stream_url: str) -> dict:
    """What DevTools saw of the stream's request: protocol, status, failure."""
    facts: dict = {"stream_protocol": "", "stream_status": None, "stream_failure": None}
    request_ids = set()
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "Network.responseReceived":
            response = params.get("response", {})
            if response.get("url") == stream_url:
                request_ids.add(params.get("requestId"))
                facts["stream_protocol"] = response.get("protocol", "")
                facts["stream_status"] = response.get("status")
                facts["stream_content_type"] = response.get("mimeType", "")
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "Network.loadingFailed" and params.get("requestId") in request_ids:
            facts["stream_failure"] = params.get("errorText")
    return facts


def check(result: dict, protocol: str) -> None:
    """Raises unless the player played and everything came over `protocol`."""
    problems = []
    if result.get("error"):
        problems.append(f"the page failed: {result['error']}")
    if not result.get("playing"):
        problems.append("the video never started playing")
    if result.get("stream_status") not in (None, 200):
        problems.append(f"the stream was answered {result.get('stream_status')}")
    if protocol:
        for what in ("page_protocol", "player_protocol", "stream_protocol"):
            if result.get(what) != protocol:
                problems.append(f"{what.replace('_', ' ')} was {result.get(what)!r}, expected {protocol!r}")
    if problems:
        raise DriverError(EXIT_PAGE, "; ".join(problems))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", help="URL of live_player.html")
    parser.add_argument("stream", help="URL of the stream (absolute or relative to the page)")
    parser.add_argument("--chromium", default=os.environ.get("ARTQ_CHROMIUM") or "chromium",
                        help="Chromium binary (default $ARTQ_CHROMIUM, else chromium on PATH)")
    parser.add_argument("--spki", help="base64 SHA-256 of the server key's SPKI to accept")
    parser.add_argument("--origin", help="HOST:PORT to force QUIC on (default the page's, "
                        "when it is https)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="how long the page plays, wall time (default 60)")
    parser.add_argument("--type", default="flv", choices=["flv", "mpegts"],
                        help="the stream's container, for mpegts.js")
    parser.add_argument("--protocol", default="h3",
                        help="required protocol of page, player and stream ('' for any)")
    parser.add_argument("--timeout", type=float,
                        help=f"give up after this many seconds (default --seconds + {DEFAULT_MARGIN_S:.0f})")
    parser.add_argument("--netlog", help="write Chromium's netlog here (and summarize it on failure)")
    args = parser.parse_args(argv)
    parts = urlsplit(args.page)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        parser.error("PAGE_URL must be https://HOST:PORT/... or http://HOST:PORT/...")
    if not args.seconds > 0:
        parser.error("--seconds must be positive")
    timeout = args.timeout if args.timeout is not None else args.seconds + DEFAULT_MARGIN_S
    if not timeout > args.seconds:
        parser.error("--timeout must be longer than --seconds")
    origin = args.origin
    if origin is None and parts.scheme == "https":
        origin = parts.netloc
    binary = shutil.which(args.chromium)
    if binary is None:
        print(f"error: Chromium not found ({args.chromium!r}); install it "
              "(Debian: apt-get install chromium) or pass --chromium", file=sys.stderr)
        return EXIT_BROWSER

    page_base = args.page.split("#", 1)[0]
    stream_url = urljoin(page_base, args.stream)
    fragment = urlencode({"src": stream_url, "type": args.type, "seconds": f"{args.seconds:g}"})
    page_url = f"{page_base}#{fragment}"

    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="artq-live-player-") as profile:
        log_path = os.path.join(profile, "chromium.log")
        flags = chromium_flags(
            os.path.join(profile, "profile"), origin=origin, spki=args.spki, netlog=args.netlog,
            extra=["--autoplay-policy=no-user-gesture-required"],
        )
        proc = None
        devtools = None
        code = 0
        message = ""
        result: dict = {}
        try:
            proc, devtools = start_chromium(binary, flags, log_path, WATCHED_EVENTS)
            session = open_tab(devtools, page_url, deadline, enable=("Network",))
            result = wait_for_result(devtools, session, page_url, deadline)
            result.update(stream_facts(devtools.events(), stream_url))
            check(result, args.protocol)
        except DriverError as err:
            code, message = err.code, str(err)
            if proc is not None and proc.poll() is not None:
                code = EXIT_BROWSER
                message += f" (Chromium exited with status {proc.returncode})"
        finally:
            if proc is not None:
                stop_chromium(proc, devtools)
        if result:
            print(f"result: {json.dumps(result, sort_keys=True)}", flush=True)
        if code == 0:
            return 0
        print(f"error: {message}", file=sys.stderr)
        report_failure(binary, flags, page_url, args.netlog, log_path)
        return code


if __name__ == "__main__":
    sys.exit(main())
