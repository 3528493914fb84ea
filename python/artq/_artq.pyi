"""Type stubs of the native module (crates/python/src/lib.rs)."""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

__version__: str

class ArtqError(Exception):
    """Base class of artq's errors."""

class ScenarioError(ArtqError):
    """A scenario that cannot run: an unknown key, a bad value, a missing
    trace, an unknown scheme."""

def sim(scenario: Optional[Mapping[str, Any]] = None, **options: Any) -> Dict[str, Any]:
    """Run one simulation; returns the fields of ``artq sim --json``.

    ``scenario`` holds scenario keys (those of ``artq sim --scenario
    FILE``); keyword arguments add to or override it."""

def default_scenario() -> Dict[str, Any]:
    """The scenario ``sim()`` runs with no arguments: every key and its
    default."""

def schemes() -> List[Tuple[str, str]]:
    """The recovery schemes as (name, description); ``name:X`` takes a
    parameter."""

def experiments() -> List[Tuple[str, str]]:
    """The experiments of ``reproduce`` as (name, title)."""

def reproduce(
    names: Optional[Sequence[str]] = None,
    quick: bool = True,
    out: str = "artq-out",
    jobs: Optional[int] = None,
    progress: bool = True,
) -> List[str]:
    """Regenerate the papers' evaluations as ``artq reproduce`` does;
    returns the paths written under ``out``."""
