"""``artq.sweep``: a grid of scenarios x schemes x seeds as Ray tasks, gathered into
a pandas DataFrame with one row per run.

Each run goes through the same code as a case of ``artq reproduce``
(``_artq.run_case``: the scenario with the scheme and the seed, the row of
``NAME_runs.csv``), so a sweep's rows are those ``artq reproduce`` and
``artq.sim`` give for the same runs, wherever they ran. The CSVs are
written by the same writers as ``artq reproduce``'s (``_artq.experiment_csvs``).

``sweep`` needs ``ray`` and ``pandas`` (``pip install 'artq[sweep]'``); the
rest of the module only the package itself.
"""

import json
import operator
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from . import _artq
from ._artq import ExperimentError, GridError, MissingExtraError, OutputError
from ._progress import bar
from .results import Grid, RunCase, SimResult

if TYPE_CHECKING:
    import pandas

__all__ = ["sweep", "grid_runs", "flatten", "write_csvs", "experiment_grid"]


def _label(scenario: Mapping[str, Any]) -> str:
    """A group label for an unnamed scenario: its keys, compactly."""
    return json.dumps(scenario, sort_keys=True, separators=(",", ":"))


def _seeds(seeds: Union[int, Iterable[int]]) -> List[int]:
    """``seeds`` (a count, seeds 1..n, or the seeds) as a list of seeds."""
    if isinstance(seeds, bool):
        raise GridError(f"seeds is a count or a list of seeds, not {seeds!r}")
    if isinstance(seeds, int):
        seeds = range(1, seeds + 1)
    try:
        listed = list(seeds)
    except TypeError:
        raise GridError(f"seeds is a count or a list of seeds, not {seeds!r}") from None
    out = []
    for s in listed:
        try:
            seed = operator.index(s)  # int, numpy integers; not floats
        except TypeError:
            seed = -1
        if isinstance(s, bool) or not 0 <= seed < 2**64:
            raise GridError(f"a seed is an integer from 0 to 2^64 - 1, not {s!r}")
        out.append(seed)
    if not out:
        raise GridError("no seeds")
    return out


def grid_runs(grid: Grid, seeds: Union[int, Iterable[int]]) -> List[Tuple[Dict[str, Any], str, str, int]]:
    """The runs of a sweep grid, in order: groups, then schemes, then
    seeds (as ``artq reproduce`` orders its cases).

    Parameters
    ----------
    grid : dict
        ``scenarios``: a dict of group name to scenario keys, or a list of
        scenario dicts, each then labelled by its keys (default: one
        scenario of defaults); ``schemes``: scheme names (default: each
        scenario's own); ``base``: scenario keys every scenario starts
        from, the sub-tables (``link``, ``workload``) merged key by key.
        See ``artq.results.Grid``.
    seeds : int or iterable of int
        A count (seeds 1..n) or the seeds.

    Returns
    -------
    list of tuple
        ``(scenario, group, scheme, seed)`` per run, ``scenario`` with the
        scheme and the seed set.

    Raises
    ------
    GridError
        A grid that is not a dict, an unknown grid key, a scenario or base
        that is not a dict, a scheme that is not a string, no seeds or a
        seed that is not a non-negative integer.
    """
    if not isinstance(grid, Mapping):
        raise GridError("a grid is a dict with 'scenarios' and 'schemes'")
    unknown = set(grid) - {"scenarios", "schemes", "base"}
    if unknown:
        raise GridError(f"unknown grid keys {sorted(unknown)}; the keys are scenarios, schemes, base")
    scenarios = grid.get("scenarios", [{}])
    if isinstance(scenarios, Mapping):
        named = list(scenarios.items())
    elif isinstance(scenarios, (list, tuple)):
        named = [(_label(s) if isinstance(s, Mapping) else "", s) for s in scenarios]
    else:
        raise GridError(f"scenarios is a dict of named scenarios or a list of scenarios, not {scenarios!r}")
    for group, scenario in named:
        if not isinstance(scenario, Mapping):
            raise GridError(f"a scenario is a dict of scenario keys, not {scenario!r}")
    base = grid.get("base", {})
    if not isinstance(base, Mapping):
        raise GridError(f"base is a dict of scenario keys, not {base!r}")
    schemes = grid.get("schemes")
    if isinstance(schemes, str):
        schemes = [schemes]
    if schemes is not None and (
        not isinstance(schemes, (list, tuple)) or not all(isinstance(s, str) for s in schemes)
    ):
        raise GridError(f"schemes is a list of scheme names, not {schemes!r}")
    seeds = _seeds(seeds)
    runs = []
    for group, scenario in named:
        merged = _merge(base, scenario)
        for scheme in schemes or [merged.get("scheme", "quic")]:
            for seed in seeds:
                runs.append((dict(merged, scheme=scheme, seed=seed), str(group), scheme, seed))
    return runs


def experiment_grid(name: str, quick: bool = True, tiny: bool = False) -> Tuple[Grid, List[int]]:
    """The grid and seeds of an experiment of ``artq reproduce``, so that
    ``sweep(grid, seeds)`` runs the experiment's own runs and
    ``write_csvs(..., name)`` writes its ``NAME_runs.csv`` and
    ``NAME_summary.csv``.

    Parameters
    ----------
    name : str
        The experiment (``artq.experiments()``).
    quick, tiny : bool
        The scale, as ``artq.reproduce`` takes it.

    Returns
    -------
    grid : dict
        ``scenarios`` (the experiment's groups) and ``schemes``.
    seeds : list of int
        The seeds every case runs with.

    Raises
    ------
    ExperimentError
        An unknown experiment, or one whose cases are not a grid (every
        group with the same schemes, each case's scenario that of its group
        with its scheme, the scheme label the scheme itself).
    ArtqTypeError
        A name that is not a string.
    """
    if not isinstance(name, str):
        raise _artq.ArtqTypeError(f"an experiment name is a string, not {name!r}")
    exp = _artq.experiment_cases(name, quick=bool(quick), tiny=bool(tiny))
    scenarios: Dict[str, Dict[str, Any]] = {}
    schemes: List[str] = []
    for case in exp["cases"]:
        group, scheme = case["group"], case["scheme"]
        scenario = {k: v for k, v in case["scenario"].items() if k != "seed"}
        if scenario.get("scheme") != scheme:
            raise ExperimentError(f"experiment {name}: case {group} labels scheme {scenario.get('scheme')!r} as {scheme!r}: not a grid")
        own = {k: v for k, v in scenario.items() if k != "scheme"}
        if group not in scenarios:
            scenarios[group] = own
        elif scenarios[group] != own:
            raise ExperimentError(f"experiment {name}: group {group} has scenarios that differ beyond the scheme: not a grid")
        if scheme not in schemes:
            schemes.append(scheme)
    grid = {"scenarios": scenarios, "schemes": schemes}
    expected = {(c["group"], c["scheme"]) for c in exp["cases"]}
    if len(expected) != len(exp["cases"]) or {(g, s) for g in scenarios for s in schemes} != expected:
        raise ExperimentError(f"experiment {name}: its cases are not every group with every scheme: not a grid")
    return grid, [int(s) for s in exp["seeds"]]


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> Dict[str, Any]:
    """``over`` on ``base``, the sub-tables (``link``, ``workload``) merged
    key by key."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _run(scenario: Dict[str, Any], group: str, scheme: str, seed: int) -> RunCase:
    """One run's row (a Ray task's body)."""
    from artq import _artq as native  # a Ray worker imports the package itself

    return native.run_case(scenario, group, scheme, seed)


def flatten(result: Union[SimResult, Mapping[str, Any]], prefix: str = "") -> Dict[str, Any]:
    """An ``artq.sim`` result as flat columns.

    Parameters
    ----------
    result : dict
        An ``artq.sim`` result (``artq.results.SimResult``).
    prefix : str, default ""
        Put before every column name.

    Returns
    -------
    dict
        Nested summaries as ``recovery_latency_ms.mean``,
        ``t_wait_ms.p99``, ...; lists (``n_hist``) as JSON text;
        ``cpu_ms``, a wall-clock measurement, left out.

    Raises
    ------
    GridError
        ``result`` is not a dict.
    """
    if not isinstance(result, Mapping):
        raise GridError(f"a result is a dict of artq.sim, not {type(result).__name__}")
    out: Dict[str, Any] = {}
    for k, v in result.items():
        if not prefix and k == "cpu_ms":
            continue
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        elif isinstance(v, list):
            out[f"{prefix}{k}"] = json.dumps(v)
        else:
            out[f"{prefix}{k}"] = v
    return out


def _row(run: Mapping[str, Any]) -> Dict[str, Any]:
    """A DataFrame row: the case (group, scheme, seed, error), then the
    ``artq sim --json`` fields of the run, flattened."""
    row = {"group": run["group"], "scheme": run["scheme"], "seed": run["seed"],
           "error": run.get("error") or ""}
    for k, v in flatten(run.get("sim") or {}).items():
        row.setdefault(k, v)
    return row


def sweep(
    grid: Grid,
    seeds: Union[int, Iterable[int]] = (1,),
    address: Optional[str] = None,
    out: Optional[str] = None,
    name: str = "sweep",
    num_cpus: Optional[int] = None,
    progress: bool = True,
) -> "pandas.DataFrame":
    """Run every scenario x scheme x seed of a grid as one Ray task each.

    Parameters
    ----------
    grid : dict
        ``scenarios``, ``schemes``, ``base`` (see ``grid_runs`` and
        ``artq.results.Grid``).
    seeds : int or iterable of int, default (1,)
        A count (seeds 1..n) or the seeds.
    address : str, optional
        A Ray cluster's address (``"ray://head:10001"`` or ``"auto"``);
        None starts (or reuses) a local Ray.
    out : str, optional
        A directory to write ``NAME_runs.csv`` and ``NAME_summary.csv``
        into, as ``artq reproduce`` writes them.
    name : str, default "sweep"
        The ``NAME`` of those files.
    num_cpus : int, optional
        The local Ray's CPUs (default: all).
    progress : bool, default True
        A tqdm bar of the runs on stderr when stderr is a terminal (none
        otherwise). False: none.

    Returns
    -------
    pandas.DataFrame
        One row per run, in ``grid_runs`` order: ``group, scheme, seed,
        error``, then the fields of ``artq sim --json`` flattened
        (``fct_ms``, ``replicas``, ``recovery_latency_ms.mean``,
        ``t_wait_ms.p99``, ...; a failed run has ``error`` and NaNs). Its
        ``attrs["runs"]`` keeps the raw rows (``artq.results.RunCase``,
        ``write_csvs`` input).

    Raises
    ------
    MissingExtraError
        ray or pandas is not installed (``pip install 'artq[sweep]'``).
    GridError
        A malformed grid or seeds.
    ArtqTypeError, ArtqValueError
        ``name``, ``out``, ``address`` or ``num_cpus`` of the wrong type,
        ``num_cpus`` below 1.
    ScenarioError, ScenarioFileNotFound
        A scenario of the grid cannot be built; raised before any task is
        submitted, as ``artq.sim`` raises it.
    OutputError
        The CSVs cannot be written under ``out``.
    """
    try:
        import pandas as pd
        import ray
    except ImportError as e:
        raise MissingExtraError(
            f"artq.sweep needs ray and pandas ({e}): pip install 'artq[sweep]'"
        ) from e

    runs = grid_runs(grid, seeds)
    if not isinstance(name, str):
        raise _artq.ArtqTypeError(f"name is a string, not {name!r}")
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise _artq.ArtqTypeError(f"out is a directory name, not {out!r}")
    if address is not None and not isinstance(address, str):
        raise _artq.ArtqTypeError(f"address is a Ray address such as 'auto', not {address!r}")
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int)):
        raise _artq.ArtqTypeError(f"num_cpus is a number of CPUs, not {num_cpus!r}")
    if num_cpus is not None and num_cpus < 1:
        raise _artq.ArtqValueError(f"num_cpus {num_cpus} must be at least 1")
    # Bad scenarios fail here, in the caller's process, with the message
    # sim() gives, rather than as a Ray task error.
    for scenario in {json.dumps(r[0], sort_keys=True) for r in runs}:
        _check(json.loads(scenario))
    if not ray.is_initialized():
        if address is None:
            ray.init(
                num_cpus=num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        else:
            ray.init(address=address, log_to_driver=False)
    task = ray.remote(num_cpus=1)(_run)
    refs = [task.remote(*r) for r in runs]
    shown = bar(len(refs), name) if progress else None
    if shown is None:
        rows = ray.get(refs)
    else:
        # Gathered as they finish, for the bar; kept in grid order.
        index = {ref: i for i, ref in enumerate(refs)}
        gathered: List[Any] = [None] * len(refs)
        pending = refs
        with shown:
            while pending:
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
                for ref, row in zip(done, ray.get(done)):
                    gathered[index[ref]] = row
                shown.update(len(done))
        rows = gathered
    frame = pd.DataFrame([_row(r) for r in rows])
    frame.attrs["runs"] = rows
    if out is not None:
        write_csvs(rows, out, name)
    return frame


def _check(scenario: Dict[str, Any]) -> None:
    """Raise the ``ScenarioError`` or ``ScenarioFileNotFound`` ``sim()``
    would for a scenario that cannot be built (without running it)."""
    _artq.validate(scenario)


def write_csvs(rows: Iterable[Union[RunCase, Mapping[str, Any]]], out: str, name: str = "sweep") -> List[str]:
    """Write runs as ``artq reproduce`` writes an experiment's CSVs, with
    its writers (same columns, same number formats).

    Parameters
    ----------
    rows : iterable of dict
        Runs as ``_artq.run_case`` returns them (``artq.results.RunCase``;
        a sweep's ``frame.attrs["runs"]``).
    out : str
        The directory, created when missing.
    name : str, default "sweep"
        The files are ``out/NAME_runs.csv`` and ``out/NAME_summary.csv``.

    Returns
    -------
    list of str
        The two paths.

    Raises
    ------
    GridError
        Rows that are not ``run_case`` rows.
    OutputError
        The directory or a file cannot be written.
    ArtqTypeError
        ``out`` or ``name`` is not a string.
    """
    if not isinstance(out, (str, os.PathLike)) or not isinstance(name, str):
        raise _artq.ArtqTypeError(f"out and name are strings, not {out!r} and {name!r}")
    try:
        rows = list(rows)
    except TypeError:
        raise GridError(f"rows is a list of run_case rows, not {rows!r}") from None
    runs_csv, summary_csv = _artq.experiment_csvs(name, rows)
    paths = []
    try:
        os.makedirs(out, exist_ok=True)
        for suffix, text in (("runs", runs_csv), ("summary", summary_csv)):
            path = os.path.join(out, f"{name}_{suffix}.csv")
            with open(path, "w") as f:
                f.write(text)
            paths.append(path)
    except OSError as e:
        raise OutputError(f"cannot write the CSVs into {out}: {e}") from e
    return paths
