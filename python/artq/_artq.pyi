"""Type stubs of the native module (crates/python/src/lib.rs)."""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

__version__: str

class ArtqError(Exception):
    """An error of artq itself (results that cannot be written)."""

class ScenarioError(ValueError):
    """A scenario that cannot run: an unknown key, a bad value, an unknown
    scheme. The message is the command line's."""

class ScenarioFileNotFound(FileNotFoundError):
    """A file the scenario names (a trace, a loss pattern) does not exist.
    The message is the command line's."""

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
    tiny: bool = False,
) -> List[str]:
    """Regenerate the papers' evaluations as ``artq reproduce`` does
    (``quick=False``: the paper's sizes; ``tiny=True``: the test suite's,
    as ``--tiny``); returns the paths written under ``out``."""

def experiment_cases(name: str, quick: bool = True, tiny: bool = False) -> Dict[str, Any]:
    """The runs of an experiment of ``reproduce`` at that scale: ``name``,
    ``seeds`` and ``cases`` (dicts ``group``, ``scheme``, ``scenario``)."""

def decisions() -> List[Tuple[str, str]]:
    """The decisions the environment steers, as (name, description)."""

def rewards() -> List[Tuple[str, str]]:
    """The reward presets (the papers' rewards), as (name, description)."""

Step = Tuple[Optional[List[float]], float, bool, bool]

class SteeredRun:
    """One simulated run paused at every decision of one kind (the engine
    of ``artq.env.RetransmissionEnv``)."""

    actions: int
    observation_len: int
    decisions: int

    @staticmethod
    def start(
        scenario: Optional[Mapping[str, Any]],
        decision: str = "art",
        reward: Optional[str] = None,
        r_max: int = 8,
    ) -> Tuple["SteeredRun", Step]:
        """Start the run steering ``decision`` (``"art"``,
        ``"rcp[:OPTIONS]"`` or ``"autorec"``, which needs a ``live``
        workload) with the reward preset ``reward`` (None: the decision's
        paper's: ``art-dqn``, ``rcp``, ``autorec``); returns it and the
        first step ``(observation, reward, terminated, truncated)``."""
    def act(self, action: int) -> Step:
        """Answer the waiting decision; run to the next one or the end."""
    def result(self) -> Optional[Dict[str, Any]]:
        """The ``artq sim --json`` dict once the run ended."""

def validate(scenario: Optional[Mapping[str, Any]] = None, **options: Any) -> None:
    """Raise what ``sim()`` would for a scenario that cannot be built,
    without running it."""

def run_columns() -> List[str]:
    """The columns of ``artq reproduce``'s ``NAME_runs.csv`` after
    ``experiment``: group, scheme, seed, error, then the metrics."""

def run_case(scenario: Optional[Mapping[str, Any]], group: str, scheme: str, seed: int) -> Dict[str, Any]:
    """One run as a case of an experiment: ``group``, ``scheme``, ``seed``,
    ``error``, ``metrics`` (the runs-CSV row) and ``sim`` (the ``artq sim
    --json`` dict)."""

def experiment_csvs(name: str, runs: List[Mapping[str, Any]]) -> Tuple[str, str]:
    """``NAME_runs.csv`` and ``NAME_summary.csv`` texts for ``run_case``
    rows, written by ``artq reproduce``'s writers."""
