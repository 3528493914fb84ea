"""Type stubs of the native module (crates/python/src/lib.rs).

tests/python/test_artq.py checks that these declare what the module
defines: the same names, the same parameters and defaults, the same first
docstring line."""

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .results import ExperimentCases, RunCase, SimResult

__version__: str

class ArtqError(Exception):
    """The base of every exception artq raises."""

class ArtqValueError(ArtqError, ValueError):
    """A bad argument value; also a ``ValueError``."""

class ArtqTypeError(ArtqError, TypeError):
    """An argument of the wrong type; also a ``TypeError``."""

class ScenarioError(ArtqValueError):
    """A scenario that cannot run; also a ``ValueError``."""

class ScenarioFileNotFound(ArtqError, FileNotFoundError):
    """A file a scenario names does not exist; also a ``FileNotFoundError``."""

class ExperimentError(ArtqValueError):
    """An unknown experiment, or one that is not a grid; also a ``ValueError``."""

class GridError(ArtqValueError):
    """A malformed sweep grid or run rows; also a ``ValueError``."""

class EnvError(ArtqValueError):
    """An environment that cannot be built or stepped as asked; also a ``ValueError``."""

class RunError(ArtqError, RuntimeError):
    """A run that could not complete, or was driven out of order; also a ``RuntimeError``."""

class OutputError(ArtqError, OSError):
    """Results that cannot be written; also an ``OSError``."""

class MissingExtraError(ArtqError, ImportError):
    """An optional dependency is missing; also an ``ImportError``."""

def sim(scenario: Optional[Mapping[str, Any]] = None, **options: Any) -> SimResult:
    """Run one simulation and return its result as a dict."""

def default_scenario() -> Dict[str, Any]:
    """The scenario keys' defaults, as a dict."""

def schemes() -> List[Tuple[str, str]]:
    """The recovery schemes, as (name, description) pairs."""

def experiments() -> List[Tuple[str, str]]:
    """The experiments of ``reproduce``, as (name, title) pairs."""

def reproduce(
    names: Optional[Sequence[str]] = None,
    quick: bool = True,
    out: str = "artq-out",
    jobs: Optional[int] = None,
    tiny: bool = False,
    on_run: Optional[Callable[[str, int, int, str, str, int, Optional[str]], Any]] = None,
) -> List[str]:
    """Regenerate the papers' evaluations, as ``artq reproduce`` does."""

def experiment_cases(name: str, quick: bool = True, tiny: bool = False) -> ExperimentCases:
    """The runs of an experiment of ``reproduce`` at a scale."""

def decisions() -> List[Tuple[str, str]]:
    """The decisions the environment can steer, as (name, description)."""

def rewards() -> List[Tuple[str, str]]:
    """The reward presets, as (name, description)."""

Step = Tuple[Optional[List[float]], float, bool, bool]

class SteeredRun:
    """One simulated run paused at every decision of one kind."""

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
        """Start a run steered at one kind of decision."""
    def act(self, action: int) -> Step:
        """Answer the waiting decision and run to the next."""
    def result(self) -> Optional[SimResult]:
        """The `artq sim --json` dict of the run once it ended, else None."""

def validate(scenario: Optional[Mapping[str, Any]] = None, **options: Any) -> None:
    """Check a scenario without running it."""

def run_columns() -> List[str]:
    """The columns of a run's row, in ``artq reproduce``'s order."""

def run_case(scenario: Optional[Mapping[str, Any]], group: str, scheme: str, seed: int) -> RunCase:
    """Run a scenario as one case of an experiment."""

def experiment_csvs(name: str, runs: List[Mapping[str, Any]]) -> Tuple[str, str]:
    """The CSV texts of ``artq reproduce`` for runs of ``run_case``."""
