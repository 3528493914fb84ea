"""Headless Chromium driven over the DevTools protocol pipe: the part every
browser driver of the test harness shares.

Why it exists: two drivers put an unmodified Chromium in front of a server
under test: chromium_fetch.py (a page that fetches and hashes a file,
tests/interop) and tests/edge/live_player.py (a page that plays a live
stream with mpegts.js). How Chromium is started, talked to, stopped and
diagnosed is the same for both and is kept here once.

How: a fresh profile in a temp dir; Chromium's DevTools protocol over
--remote-debugging-pipe (fds 3 and 4: no port, no extra package); one new
tab navigated to the page; window.artqResult polled with Runtime.evaluate
until the page publishes it or the deadline passes. For an https origin QUIC
is forced (--origin-to-force-quic-on) and the server's self-signed
certificate is accepted by its key's SPKI hash
(--ignore-certificate-errors-spki-list); everything that would reach the
network in the background is switched off. Only the standard library.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import fcntl
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

EXIT_PAGE = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3
EXIT_BROWSER = 4

# Flags every run uses. Headless without a sandbox (CI runs as root), no GPU,
# and nothing in the background: on a closed network Chromium's own requests
# (component updates, sync, field trials, safe browsing) fail or stall.
BASE_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--remote-debugging-pipe",
]

POLL_SECONDS = 0.2
PR_SET_PDEATHSIG = 1

# How many watched DevTools events a run keeps (the newest); a live stream
# can produce many, and a driver needs only a few of them.
MAX_EVENTS = 2000

try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
except OSError:
    _libc = None
LOG_TAIL_BYTES = 4000


class DriverError(Exception):
    """A failure with the exit code it maps to."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class DevTools:
    """A minimal DevTools protocol client over Chromium's debugging pipe.

    Messages are JSON objects separated by NUL bytes. A reader thread splits
    them; replies are matched to requests by id. Events are dropped unless
    their method was named in `watch`: those are kept (the newest
    MAX_EVENTS) for `events()`.
    """

    def __init__(self, to_browser: int, from_browser: int,
                 watch: frozenset[str] = frozenset()) -> None:
        self._out = os.fdopen(to_browser, "wb", buffering=0)
        self._in = os.fdopen(from_browser, "rb", buffering=0)
        self._next_id = 0
        self._replies: queue.Queue[dict | None] = queue.Queue()
        self._watch = watch
        self._events: collections.deque[dict] = collections.deque(maxlen=MAX_EVENTS)
        self._events_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        pending = b""
        try:
            while True:
                chunk = self._in.read(65536)
                if not chunk:
                    break
                pending += chunk
                while b"\0" in pending:
                    raw, pending = pending.split(b"\0", 1)
                    try:
                        message = json.loads(raw)
                    except ValueError:
                        continue
                    if "id" in message:
                        self._replies.put(message)
                    elif message.get("method") in self._watch:
                        with self._events_lock:
                            self._events.append(message)
        finally:
            self._replies.put(None)  # the browser closed the pipe

    def events(self) -> list[dict]:
        """The watched events received so far, oldest first."""
        with self._events_lock:
            return list(self._events)

    def call(self, method: str, params: dict | None = None, *,
             session: str | None = None, timeout: float = 30.0) -> dict:
        """Sends one command and waits (at most `timeout`) for its reply."""
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            self._out.write(json.dumps(message).encode("utf-8") + b"\0")
        except OSError as err:
            raise DriverError(EXIT_BROWSER, f"DevTools pipe closed ({err})") from err
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DriverError(EXIT_TIMEOUT, f"no reply to {method} within {timeout:.0f} s")
            try:
                reply = self._replies.get(timeout=left)
            except queue.Empty:
                continue
            if reply is None:
                self._replies.put(None)
                raise DriverError(EXIT_BROWSER, f"Chromium closed the DevTools pipe during {method}")
            if reply.get("id") != self._next_id:
                continue  # a late reply to an earlier, timed-out call
            if "error" in reply:
                raise DriverError(EXIT_BROWSER, f"{method} failed: {reply['error']}")
            return reply.get("result", {})


def chromium_flags(profile: str, *, origin: str | None, spki: str | None,
                   netlog: str | None, extra: list[str] | None = None) -> list[str]:
    """The command-line flags for one run (without the page URL): QUIC forced
    on `origin` when given, the key with SPKI hash `spki` accepted, the
    netlog written to `netlog`, then `extra`."""
    flags = BASE_FLAGS + [f"--user-data-dir={profile}"]
    if origin:
        flags.append(f"--origin-to-force-quic-on={origin}")
    if spki:
        flags.append(f"--ignore-certificate-errors-spki-list={spki}")
    if netlog:
        flags += [f"--log-net-log={netlog}", "--net-log-capture-mode=Default"]
    return flags + list(extra or [])


def start_chromium(binary: str, flags: list[str], log_path: str,
                   watch: frozenset[str] = frozenset()) -> tuple[subprocess.Popen, DevTools]:
    """Starts Chromium with the DevTools pipe on its fds 3 (commands in) and
    4 (replies out); `watch` names the DevTools events to keep."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def wire_pipe_fds() -> None:  # runs in the child between fork and exec
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)  # dup2 leaves the new fds inheritable
        os.dup2(high_w, 4)
        # If this driver is killed (a test harness deadline), the browser must
        # not outlive it: PR_SET_PDEATHSIG survives exec (Linux only).
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    log = open(log_path, "wb")
    try:
        proc = subprocess.Popen(
            [binary, *flags, "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            close_fds=False,  # fds 3 and 4 must survive; Python's own fds are non-inheritable
            preexec_fn=wire_pipe_fds,
            start_new_session=True,
        )
    except OSError as err:
        raise DriverError(EXIT_BROWSER, f"cannot start {binary}: {err}") from err
    finally:
        log.close()
        os.close(to_child_r)
        os.close(from_child_w)
    return proc, DevTools(to_child_w, from_child_r, watch)


def stop_chromium(proc: subprocess.Popen, devtools: DevTools | None) -> None:
    """Asks Chromium to close (so the netlog is finished), then kills its group."""
    if proc.poll() is None and devtools is not None:
        try:
            devtools.call("Browser.close", timeout=5)
        except DriverError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        proc.wait()
    else:
        # The browser's helper processes share its session; take them down too.
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass


def open_tab(devtools: DevTools, url: str, deadline: float,
             enable: tuple[str, ...] = ()) -> str:
    """Opens a tab, enables the DevTools domains in `enable` (e.g.
    "Network") on it, navigates it to `url` and returns its session id."""
    target = devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = devtools.call(
        "Target.attachToTarget", {"targetId": target, "flatten": True}
    )["sessionId"]
    for domain in enable:
        devtools.call(f"{domain}.enable", session=session)
    left = max(1.0, deadline - time.monotonic())
    nav = devtools.call("Page.navigate", {"url": url}, session=session, timeout=left)
    if nav.get("errorText"):
        raise DriverError(EXIT_PAGE, f"navigation to {url} failed: {nav['errorText']}")
    return session


def wait_for_result(devtools: DevTools, session: str, url: str, deadline: float) -> dict:
    """Polls the tab until the page publishes window.artqResult, and returns it."""
    last_state = "no answer yet"
    while time.monotonic() < deadline:
        left = max(1.0, deadline - time.monotonic())
        reply = devtools.call(
            "Runtime.evaluate",
            {
                "expression": "JSON.stringify({result: window.artqResult || null,"
                " title: document.title, href: location.href,"
                " state: document.readyState})",
                "returnByValue": True,
            },
            session=session,
            timeout=min(left, 30.0),
        )
        value = reply.get("result", {}).get("value")
        if isinstance(value, str):
            state = json.loads(value)
            if state.get("result"):
                return state["result"]
            last_state = (
                f"page at {state.get('href')!r}, readyState {state.get('state')!r},"
                f" title {state.get('title')!r}"
            )
            if str(state.get("href", "")).startswith("chrome-error://"):
                raise DriverError(EXIT_PAGE, f"Chromium shows an error page for {url}: {last_state}")
        time.sleep(POLL_SECONDS)
    raise DriverError(EXIT_TIMEOUT, f"the page published no result in time ({last_state})")


def load_page(devtools: DevTools, url: str, deadline: float) -> dict:
    """Opens a tab on `url` and waits for the page's published result."""
    session = open_tab(devtools, url, deadline)
    return wait_for_result(devtools, session, url, deadline)


def netlog_summary(path: str) -> str:
    """QUIC session closes and errors recorded in a Chromium netlog, one per line."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace").rstrip().rstrip(",")
    except OSError as err:
        return f"(no netlog: {err})"
    data = None
    for suffix in ("", "]}", "\n]}"):
        try:
            data = json.loads(text + suffix)
            break
        except ValueError:
            continue
    if not isinstance(data, dict):
        return "(netlog unreadable)"
    names = {v: k for k, v in data.get("constants", {}).get("logEventTypes", {}).items()}
    lines = []
    for event in data.get("events", []):
        name = names.get(event.get("type"), "")
        params = event.get("params", {})
        if name == "CERT_VERIFIER_JOB":
            if "net_error" in params:  # the job's end: its verdict, not the PEMs
                lines.append(
                    f"  CERT_VERIFIER_JOB: net_error={params['net_error']}"
                    f" cert_status={params.get('cert_status')}"
                )
            continue
        if name in (
            "QUIC_SESSION_CLOSED",
            "QUIC_SESSION_CONNECTION_CLOSE_FRAME_RECEIVED",
            "QUIC_SESSION_CONNECTION_CLOSE_FRAME_SENT",
            "QUIC_SESSION_TRANSPORT_PARAMETERS_RECEIVED",
            "QUIC_SESSION_CRYPTO_HANDSHAKE_MESSAGE_RECEIVED",
            "HTTP3_GOAWAY_RECEIVED",
        ) or (name.startswith("QUIC_") and "ERROR" in name):
            line = f"  {name}: {json.dumps(params)[:600]}"
            if not lines or lines[-1] != line:  # begin and end phases repeat params
                lines.append(line)
    if not lines:
        return "(netlog has no QUIC session events: Chromium never tried QUIC?)"
    return "\n".join(lines[-20:])


def tail(path: str) -> str:
    """The end of Chromium's log, without its D-Bus noise (no bus in CI)."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    lines = [line for line in text.splitlines() if "dbus" not in line]
    return "\n".join(lines)[-LOG_TAIL_BYTES:]


def report_failure(binary: str, flags: list[str], url: str, netlog: str | None,
                   log_path: str) -> None:
    """Says on stderr how Chromium was run and what it logged: its command
    line, the QUIC events of its netlog (when one was written) and the
    end of its log. Every driver prints this when a run fails."""
    print(f"chromium: {binary} {' '.join(flags)} {url}", file=sys.stderr)
    if netlog:
        print(f"netlog {netlog} (QUIC events):\n{netlog_summary(netlog)}", file=sys.stderr)
    print(f"chromium log tail:\n{tail(log_path)}", file=sys.stderr)
