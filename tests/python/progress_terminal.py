"""The progress tests' terminal: what a call shows on stderr when stderr is
an 80-column terminal (a pseudo-terminal), where artq draws tqdm's bars.
Shared by test_artq.py (reproduce) and test_sweep.py (sweep)."""

import contextlib
import fcntl
import os
import pty
import struct
import sys
import termios


def on_a_terminal(run):
    """Calls ``run()`` with ``sys.stderr`` a pseudo-terminal of 80 columns.

    Returns
    -------
    tuple
        ``run()``'s result and the text it showed on the terminal.
    """
    master, slave = pty.openpty()
    # A terminal of 80 columns (a new pty has 0, where tqdm draws nothing).
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    saved = sys.stderr
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            if not tty.isatty():
                raise AssertionError("the pseudo-terminal is not a terminal")
            sys.stderr = tty
            try:
                result = run()
            finally:
                sys.stderr = saved
        os.set_blocking(master, False)
        text = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(master, 65536):
                text += chunk
    finally:
        os.close(master)
        os.close(slave)
    return result, text.decode(errors="replace")
