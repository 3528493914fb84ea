#!/usr/bin/env python3
"""Opens an `artq reproduce` report.html in headless Chromium and checks what
a reader sees.

Why it exists: report.html is what most users look at, offline, in a
browser. A test that only reads the HTML text cannot tell whether the
browser rendered the charts (an SVG a browser refuses is an empty box), or
whether the page logs errors. This driver asks the browser itself.

Checks, each a failure when it does not hold:

- the page loads with no console error, no uncaught exception, no log entry
  of level error, and requests nothing but the file itself and data: URIs
  (nothing from the network);
- every <img> finished loading with a non-zero natural and displayed size
  (the charts are inline SVG data: URIs);
- every experiment section marked with data-paper-values > 0 has a chart
  whose SVG (decoded in the page) has a text "paper" (the legend entry of
  the paper's values); a section with 0 has none;
- screenshots of the first screen and of the experiment named by
  --experiment are PNGs of more than MIN_PNG_BYTES (a blank white screen
  compresses to far less) and differ from each other.

Chromium is started with chromium_cdp.py (tests/interop), over the DevTools
pipe, with the standard library only.

Usage::

    check_report.py [--chromium BIN] [--timeout S] --experiment NAME
                    --screenshots DIR REPORT_HTML

Prints one line ``ok: {json summary}`` and exits 0, or explains each failure
on stderr and exits 1 (2: bad usage, 3: timeout, 4: Chromium did not start).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "interop"))

from chromium_cdp import (  # noqa: E402
    EXIT_BROWSER,
    EXIT_PAGE,
    EXIT_TIMEOUT,
    DriverError,
    chromium_flags,
    open_tab,
    start_chromium,
    stop_chromium,
    tail,
)

MIN_PNG_BYTES = 8000
WATCH = frozenset({
    "Runtime.consoleAPICalled",
    "Runtime.exceptionThrown",
    "Log.entryAdded",
    "Network.requestWillBeSent",
})

# Runs in the page: every image's state and every section's paper check.
PROBE = r"""
(() => {
  const texts = (src) => {
    if (!src.startsWith('data:image/svg+xml;base64,')) return null;
    const svg = atob(src.slice(src.indexOf(',') + 1));
    const doc = new DOMParser().parseFromString(svg, 'image/svg+xml');
    return Array.from(doc.querySelectorAll('text')).map(t => t.textContent.trim());
  };
  const images = Array.from(document.images).map(img => {
    const r = img.getBoundingClientRect();
    return {alt: img.alt, complete: img.complete, natural: [img.naturalWidth, img.naturalHeight],
            shown: [r.width, r.height], inline: img.src.startsWith('data:image/svg+xml;base64,')};
  });
  const sections = Array.from(document.querySelectorAll('section[data-experiment]')).map(s => {
    const imgs = Array.from(s.querySelectorAll('img'));
    const withPaper = imgs.filter(i => (texts(i.src) || []).includes('paper')).length;
    return {name: s.dataset.experiment, paperValues: Number(s.dataset.paperValues),
            charts: imgs.length, chartsWithPaper: withPaper};
  });
  return JSON.stringify({state: document.readyState, title: document.title, images, sections});
})()
"""


def evaluate(devtools, session: str, expression: str, timeout: float = 30.0):
    reply = devtools.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                          session=session, timeout=timeout)
    if reply.get("exceptionDetails"):
        raise DriverError(EXIT_PAGE, f"the probe failed: {reply['exceptionDetails']}")
    return reply.get("result", {}).get("value")


def screenshot(devtools, session: str, path: str) -> int:
    data = devtools.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
    raw = base64.b64decode(data)
    with open(path, "wb") as f:
        f.write(raw)
    return len(raw)


def problems(state: dict, events: list[dict], shots: dict[str, int], report_url: str) -> list[str]:
    out = []
    for ev in events:
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append(f"console {params.get('type')}: {params.get('args')}")
        elif method == "Runtime.exceptionThrown":
            out.append(f"uncaught exception: {params.get('exceptionDetails')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            out.append(f"log error: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if url != report_url and not url.startswith("data:"):
                out.append(f"the page requested {url}")
    if not state["images"]:
        out.append("the page has no images")
    for img in state["images"]:
        if not (img["complete"] and img["inline"] and min(img["natural"]) > 0
                and min(img["shown"]) > 0):
            out.append(f"chart {img['alt']!r} did not render: {img}")
    if not state["sections"]:
        out.append("the page has no experiment sections")
    for s in state["sections"]:
        if s["paperValues"] > 0 and s["chartsWithPaper"] == 0:
            out.append(f"{s['name']}: the paper gives {s['paperValues']} values, no chart shows them")
        if s["paperValues"] == 0 and s["chartsWithPaper"] > 0:
            out.append(f"{s['name']}: charts show paper values the report does not have")
    for name, size in shots.items():
        if size < MIN_PNG_BYTES:
            out.append(f"screenshot {name} is {size} bytes: blank?")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="the report.html to open")
    parser.add_argument("--chromium", default=os.environ.get("ARTQ_CHROMIUM") or "chromium")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--experiment", required=True, help="the experiment to screenshot")
    parser.add_argument("--screenshots", required=True, help="directory for the PNGs")
    args = parser.parse_args(argv)
    report = pathlib.Path(args.report).resolve()
    if not report.is_file():
        parser.error(f"{report} is not a file")
    binary = shutil.which(args.chromium)
    if binary is None:
        print(f"error: Chromium not found ({args.chromium!r}); install it "
              "(Debian: apt-get install chromium) or set ARTQ_CHROMIUM", file=sys.stderr)
        return EXIT_BROWSER
    os.makedirs(args.screenshots, exist_ok=True)
    url = report.as_uri()
    deadline = time.monotonic() + args.timeout
    with tempfile.TemporaryDirectory(prefix="artq-report-") as profile:
        log_path = os.path.join(profile, "chromium.log")
        flags = chromium_flags(os.path.join(profile, "profile"), origin=None, spki=None,
                               netlog=None, extra=["--hide-scrollbars"])
        proc = devtools = None
        try:
            proc, devtools = start_chromium(binary, flags, log_path, WATCH)
            session = open_tab(devtools, "about:blank", deadline,
                               enable=("Runtime", "Log", "Network", "Page"))
            devtools.call("Emulation.setDeviceMetricsOverride",
                          {"width": 1280, "height": 900, "deviceScaleFactor": 1,
                           "mobile": False}, session=session)
            nav = devtools.call("Page.navigate", {"url": url}, session=session)
            if nav.get("errorText"):
                raise DriverError(EXIT_PAGE, f"navigation to {url} failed: {nav['errorText']}")
            while True:
                state = json.loads(evaluate(devtools, session, PROBE))
                if state["state"] == "complete" and all(i["complete"] for i in state["images"]):
                    break
                if time.monotonic() > deadline:
                    raise DriverError(EXIT_TIMEOUT, f"the page did not finish loading: {state['state']}")
                time.sleep(0.2)
            shots = {"first-screen": screenshot(devtools, session,
                                                os.path.join(args.screenshots, "first-screen.png"))}
            found = evaluate(devtools, session,
                             "(() => { const s = document.getElementById("
                             f"{json.dumps('exp-' + args.experiment)}); if (!s) return false;"
                             " s.scrollIntoView(); return true; })()")
            if not found:
                raise DriverError(EXIT_PAGE, f"no section of experiment {args.experiment!r}")
            time.sleep(0.3)
            shots["experiment"] = screenshot(devtools, session,
                                             os.path.join(args.screenshots, "experiment.png"))
            first = pathlib.Path(args.screenshots, "first-screen.png").read_bytes()
            second = pathlib.Path(args.screenshots, "experiment.png").read_bytes()
            found_problems = problems(state, devtools.events(), shots, url)
            if first == second:
                found_problems.append("the two screenshots are the same picture")
        except DriverError as err:
            print(f"error: {err}\n{tail(log_path)}", file=sys.stderr)
            return err.code
        finally:
            if proc is not None:
                stop_chromium(proc, devtools)
    if found_problems:
        for p in found_problems:
            print(f"problem: {p}", file=sys.stderr)
        return EXIT_PAGE
    summary = {"title": state["title"], "images": len(state["images"]),
               "sections": state["sections"], "screenshots": shots}
    print(f"ok: {json.dumps(summary, sort_keys=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
