"""``artq.sweep``: a grid of scenarios x schemes x seeds as Ray tasks, gathered into
a pandas DataFrame with one row per run.

Each run goes through the same code as a case of ``artq reproduce``
(``_artq.run_case``: the scenario with the scheme and the seed, the row of
``NAME_runs.csv``), so a sweep's rows are those ``artq reproduce`` and
``artq.sim`` give for the same runs, wherever they ran. The CSVs are
written by the same writers as ``artq reproduce``'s (``_artq.experiment_csvs``).

Needs ``ray`` and ``pandas`` (``pip install ray pandas``).
"""

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _artq

__all__ = ["sweep", "grid_runs", "flatten", "write_csvs", "experiment_grid"]

Grid = Mapping[str, Any]


def _label(scenario: Mapping[str, Any]) -> str:
    """A group label for an unnamed scenario: its keys, compactly."""
    return json.dumps(scenario, sort_keys=True, separators=(",", ":"))


def grid_runs(grid: Grid, seeds: Iterable[int]) -> List[Tuple[Dict[str, Any], str, str, int]]:
    """The runs of ``grid`` as ``(scenario, group, scheme, seed)``, in
    order: groups, then schemes, then seeds (as ``artq reproduce`` orders
    its cases).

    ``grid`` has ``scenarios`` (a dict group name -> scenario dict, or a
    list of scenario dicts, each then labelled by its keys), ``schemes``
    (a list of scheme names; default: each scenario's own) and optionally
    ``base`` (scenario keys every scenario starts from)."""
    if not isinstance(grid, Mapping):
        raise ValueError("a grid is a dict with 'scenarios' and 'schemes'")
    unknown = set(grid) - {"scenarios", "schemes", "base"}
    if unknown:
        raise ValueError(f"unknown grid keys {sorted(unknown)}; the keys are scenarios, schemes, base")
    scenarios = grid.get("scenarios", [{}])
    if isinstance(scenarios, Mapping):
        named = list(scenarios.items())
    else:
        named = [(_label(s), s) for s in scenarios]
    base = dict(grid.get("base", {}))
    schemes: Optional[Sequence[str]] = grid.get("schemes")
    if isinstance(schemes, str):
        schemes = [schemes]
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("no seeds")
    runs = []
    for group, scenario in named:
        merged = _merge(base, scenario)
        for scheme in schemes or [merged.get("scheme", "quic")]:
            for seed in seeds:
                runs.append((dict(merged, scheme=scheme, seed=seed), str(group), scheme, seed))
    return runs


def experiment_grid(name: str, quick: bool = True, tiny: bool = False) -> Tuple[Dict[str, Any], List[int]]:
    """The grid and seeds of ``artq reproduce``'s experiment ``name`` (at
    the scale of ``reproduce(quick=, tiny=)``), so that ``sweep(grid,
    seeds)`` runs the experiment's own runs and ``write_csvs(..., name)``
    writes its ``NAME_runs.csv`` and ``NAME_summary.csv``.

    An experiment whose cases are not a grid (every group with the same
    schemes, each case's scenario that of its group with its scheme, the
    scheme label the scheme itself) raises ``ValueError``."""
    exp = _artq.experiment_cases(name, quick=quick, tiny=tiny)
    scenarios: Dict[str, Dict[str, Any]] = {}
    schemes: List[str] = []
    for case in exp["cases"]:
        group, scheme = case["group"], case["scheme"]
        scenario = {k: v for k, v in case["scenario"].items() if k != "seed"}
        if scenario.get("scheme") != scheme:
            raise ValueError(f"experiment {name}: case {group} labels scheme {scenario.get('scheme')!r} as {scheme!r}: not a grid")
        own = {k: v for k, v in scenario.items() if k != "scheme"}
        if group not in scenarios:
            scenarios[group] = own
        elif scenarios[group] != own:
            raise ValueError(f"experiment {name}: group {group} has scenarios that differ beyond the scheme: not a grid")
        if scheme not in schemes:
            schemes.append(scheme)
    grid = {"scenarios": scenarios, "schemes": schemes}
    expected = {(c["group"], c["scheme"]) for c in exp["cases"]}
    if len(expected) != len(exp["cases"]) or {(g, s) for g in scenarios for s in schemes} != expected:
        raise ValueError(f"experiment {name}: its cases are not every group with every scheme: not a grid")
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


def _run(scenario: Dict[str, Any], group: str, scheme: str, seed: int) -> Dict[str, Any]:
    """One run's row (a Ray task's body)."""
    from artq import _artq as native  # a Ray worker imports the package itself

    return native.run_case(scenario, group, scheme, seed)


def flatten(result: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """An ``artq.sim`` result as flat columns: nested summaries become
    ``recovery_latency_ms.mean``, ``t_wait_ms.p99``, ... (``cpu_ms``, a
    wall-clock measurement, is left out)."""
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
):
    """Run every scenario x scheme x seed of ``grid`` (see ``grid_runs``)
    as one Ray task each and return a pandas DataFrame, one row per run:
    ``group, scheme, seed, error``, then the fields of ``artq sim --json``
    flattened (``fct_ms``, ``replicas``, ``recovery_latency_ms.mean``,
    ``t_wait_ms.p99``, ...; a failed run has ``error`` and NaNs). The
    frame's ``attrs["runs"]`` keeps the raw rows (``write_csvs`` input).

    ``seeds``: a count (seeds 1..n) or the seeds. ``address``: a Ray
    cluster's address (``"ray://head:10001"`` or ``"auto"``); None starts
    (or reuses) a local Ray with ``num_cpus`` CPUs (default: all).
    ``out``: a directory to write ``NAME_runs.csv`` and
    ``NAME_summary.csv`` into, as ``artq reproduce`` writes them.
    """
    import pandas as pd
    import ray

    if isinstance(seeds, int):
        seeds = range(1, seeds + 1)
    runs = grid_runs(grid, seeds)
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
    rows = ray.get([task.remote(*r) for r in runs])
    frame = pd.DataFrame([_row(r) for r in rows])
    frame.attrs["runs"] = rows
    if out is not None:
        write_csvs(rows, out, name)
    return frame


def _check(scenario: Dict[str, Any]) -> None:
    """Raise the ValueError or FileNotFoundError ``sim()`` would for a
    scenario that cannot be built (without running it)."""
    _artq.validate(scenario)


def write_csvs(rows: List[Mapping[str, Any]], out: str, name: str = "sweep") -> List[str]:
    """Write ``rows`` (as ``_artq.run_case`` returns them) as
    ``out/NAME_runs.csv`` and ``out/NAME_summary.csv`` with ``artq
    reproduce``'s writers; returns the paths."""
    runs_csv, summary_csv = _artq.experiment_csvs(name, list(rows))
    os.makedirs(out, exist_ok=True)
    paths = []
    for suffix, text in (("runs", runs_csv), ("summary", summary_csv)):
        path = os.path.join(out, f"{name}_{suffix}.csv")
        with open(path, "w") as f:
            f.write(text)
        paths.append(path)
    return paths
