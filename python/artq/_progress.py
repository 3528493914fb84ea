"""Progress of long work (``artq.reproduce``, ``artq.sweep``) on stderr: a
tqdm bar when stderr is a terminal, otherwise none (``reproduce`` then
prints one plain line per run, as ``artq reproduce`` does)."""

import sys
from typing import Any, Optional


def stderr_is_terminal() -> bool:
    """Whether ``sys.stderr`` (as it is now) is a terminal."""
    stream = sys.stderr
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or detached stream
        return False


def bar(total: int, desc: str) -> Optional[Any]:
    """A tqdm bar of ``total`` steps on ``sys.stderr`` when it is a
    terminal; None otherwise."""
    if not stderr_is_terminal():
        return None
    from tqdm import tqdm  # a dependency of the package (pyproject.toml)

    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, leave=True)
