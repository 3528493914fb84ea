"""artq from Python: the trace-driven QUIC loss-recovery simulator and the
papers' experiments, without a process per run.

A run is described by the scenario keys of ``artq sim --scenario FILE``
(see docs/sim.md) and returns the fields of ``artq sim --json``::

    import artq
    r = artq.sim(scheme="art", workload={"size": "2MB"}, link={"loss": 0.05})
    print(r["fct_ms"], r["n_max"])

Runs release the GIL, so threads run simulations in parallel.

``artq.env.RetransmissionEnv`` (Gymnasium id ``artq/Retransmission-v0``,
registered when gymnasium is installed; ``pip install 'artq[env]'``)
pauses the real transport at every retransmission decision;
``artq.sweep`` fans runs out on Ray (``pip install 'artq[sweep]'``).

Every exception the package raises is an ``artq.ArtqError`` and also the
built-in it stands for (``ScenarioError`` is a ``ValueError``, ...); the
result dicts are declared in ``artq.results``.
"""

import functools
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, TypeVar

from . import _artq
from ._artq import (
    ArtqError,
    ArtqTypeError,
    ArtqValueError,
    EnvError,
    ExperimentError,
    GridError,
    MissingExtraError,
    OutputError,
    RunError,
    ScenarioError,
    ScenarioFileNotFound,
    __version__,
)

_F = TypeVar("_F", bound=Callable[..., Any])


def _typed(native: _F) -> _F:
    """``native`` with the ``TypeError`` that PyO3 raises for an argument of
    the wrong type (``artq.sim(1, 2)``, ``artq.schemes(x)``) raised as an
    ``ArtqTypeError`` (still a ``TypeError``). The native functions raise
    no other ``TypeError``."""

    @functools.wraps(native)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return native(*args, **kwargs)
        except TypeError as e:
            if isinstance(e, ArtqError):
                raise
            raise ArtqTypeError(str(e)) from e

    return call  # type: ignore[return-value]


sim = _typed(_artq.sim)
default_scenario = _typed(_artq.default_scenario)
schemes = _typed(_artq.schemes)
experiments = _typed(_artq.experiments)
decisions = _typed(_artq.decisions)
rewards = _typed(_artq.rewards)


def reproduce(
    names: Optional[Iterable[str]] = None,
    quick: bool = True,
    out: str = "artq-out",
    jobs: Optional[int] = None,
    progress: bool = True,
    tiny: bool = False,
) -> List[str]:
    """Regenerate the papers' evaluations, as ``artq reproduce`` does.

    Parameters
    ----------
    names : iterable of str, optional
        The experiments to run (see ``experiments()``); None: every one,
        an empty list: none.
    quick : bool, default True
        Run at quick scale; False: at the papers' sizes.
    out : str, default "artq-out"
        The directory the CSVs, charts, ``report.md`` and ``report.html`` are written to.
    jobs : int, optional
        Runs at once, at least 1; None: one per core.
    progress : bool, default True
        Show progress on stderr: a tqdm bar per experiment when stderr is
        a terminal, else one line per run as ``artq reproduce`` prints
        them (``[fig19] 3/40 GROUP SCHEME seed 1``). False: nothing.
    tiny : bool, default False
        The test suite's scale (``artq reproduce --tiny``); wins over
        ``quick``.

    Returns
    -------
    list of str
        The paths written under ``out``.

    Raises
    ------
    ExperimentError
        An unknown experiment name; the message lists the known ones.
    ArtqTypeError
        ``names`` that are not strings (a single string included: pass a
        list), or ``jobs`` that is not an integer.
    ArtqValueError
        ``jobs`` below 1.
    OutputError
        The results cannot be written under ``out``.

    Examples
    --------
    >>> artq.reproduce(["fig21"], tiny=True, out="artq-out")  # doctest: +SKIP
    ['artq-out/fig21_runs.csv', ...]
    """
    if names is not None:
        if isinstance(names, (str, bytes)):
            raise ArtqTypeError(f"names is a list of experiment names, not one string: [{names!r}]")
        try:
            names = list(names)
        except TypeError as e:
            raise ArtqTypeError(f"names is a list of experiment names, not {type(names).__name__}") from e
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise ArtqTypeError(f"experiment names are strings, not {bad[0]!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int)):
        raise ArtqTypeError(f"jobs is a number of runs at once, not {jobs!r}")
    if not isinstance(out, str):
        raise ArtqTypeError(f"out is a directory name, not {type(out).__name__}")
    on_run = _Reporter() if progress else None
    try:
        return _typed(_artq.reproduce)(
            names, quick=bool(quick), out=out, jobs=jobs, tiny=bool(tiny), on_run=on_run
        )
    finally:
        if on_run is not None:
            on_run.close()


class _Reporter:
    """``reproduce``'s progress: a tqdm bar per experiment when stderr is a
    terminal, else a line per run. The runs of several experiments finish
    interleaved (they share one queue), so each experiment keeps its own
    bar from its first run to its last."""

    def __init__(self) -> None:
        from ._progress import bar

        self._bar_of = bar
        # Per experiment: its bar, or None when stderr is not a terminal.
        self._bars: Dict[str, Any] = {}

    def __call__(self, name: str, done: int, total: int, group: str, scheme: str, seed: int,
                 error: Optional[str]) -> None:
        failed = f": FAILED: {error}" if error else ""
        line = f"[{name}] {done}/{total} {group} {scheme} seed {seed}{failed}"
        if name not in self._bars:
            self._bars[name] = self._bar_of(total, name)
        bar = self._bars[name]
        if bar is None:
            print(line, file=sys.stderr, flush=True)
            return
        if error:
            bar.write(line, file=sys.stderr)
        bar.update(1)
        if done >= total:
            bar.close()

    def close(self) -> None:
        for bar in self._bars.values():
            if bar is not None:
                bar.close()
        self._bars.clear()


__all__ = [
    "ArtqError",
    "ArtqTypeError",
    "ArtqValueError",
    "EnvError",
    "ExperimentError",
    "GridError",
    "MissingExtraError",
    "OutputError",
    "RunError",
    "ScenarioError",
    "ScenarioFileNotFound",
    "__version__",
    "decisions",
    "default_scenario",
    "experiments",
    "reproduce",
    "rewards",
    "schemes",
    "sim",
]

try:
    import gymnasium as _gym
except ImportError:  # the environment needs gymnasium (artq[env]); artq.sim does not
    _gym = None
if _gym is not None and "artq/Retransmission-v0" not in _gym.registry:
    _gym.register(id="artq/Retransmission-v0", entry_point="artq.env:RetransmissionEnv")


from .grid import experiment_grid, grid_runs, sweep, write_csvs  # noqa: E402 (ray and pandas load on use)

__all__ += ["experiment_grid", "grid_runs", "sweep", "write_csvs"]
