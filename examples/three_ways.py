"""One grid three ways, the same rows: an experiment of ``artq reproduce``
run one by one through ``artq.sim``, as one ``artq.sweep`` on a local Ray,
and through ``artq.reproduce``.

    python examples/three_ways.py                         # fig21 (Fig. 21), quick scale
    python examples/three_ways.py --experiment fig19 --tiny

The grid is the experiment's own (``artq.experiment_grid``): its groups x
schemes x seeds. Checked: every field of every ``artq.sim`` result equals
the sweep's row for that run, and the sweep's ``NAME_runs.csv`` and
``NAME_summary.csv`` (written by ``artq reproduce``'s writers) equal the
ones ``artq.reproduce`` writes, line for line. Prints one line per run
with a few of its numbers from each way. Run at a tiny size by
tests/python/test_three_ways.py; its output at quick scale is in
docs/python.md.
"""

import argparse
import math
import os
import tempfile
import time

import artq
from artq.grid import flatten, grid_runs

SHOWN = ("fct_ms", "n_max", "replicas")


def _same(a, b):
    """Equal, or both absent (pandas holds a missing value as NaN)."""

    def missing(x):
        return x is None or (isinstance(x, float) and math.isnan(x))

    return (missing(a) and missing(b)) or a == b


def _read(path):
    with open(path) as f:
        return f.read().splitlines()


def main(experiment="fig21", tiny=False, out=None, num_cpus=None, quiet=False):
    """Runs the three ways; returns a dict: ``runs`` (how many), ``lines``
    (the printed lines), ``mismatches`` (empty when all agree) and the
    wall times ``seconds`` of each way."""
    out = out or tempfile.mkdtemp(prefix="artq-three-ways-")
    grid, seeds = artq.experiment_grid(experiment, tiny=tiny)
    runs = grid_runs(grid, seeds)
    seconds = {}

    t = time.perf_counter()
    by_sim = [flatten(artq.sim(scenario)) for scenario, _, _, _ in runs]
    seconds["artq.sim"] = time.perf_counter() - t

    t = time.perf_counter()
    sweep_dir = os.path.join(out, "sweep")
    df = artq.sweep(grid, seeds=seeds, out=sweep_dir, name=experiment, num_cpus=num_cpus)
    seconds["artq.sweep"] = time.perf_counter() - t

    t = time.perf_counter()
    reproduce_dir = os.path.join(out, "reproduce")
    artq.reproduce([experiment], quick=True, tiny=tiny, out=reproduce_dir, progress=False)
    seconds["artq.reproduce"] = time.perf_counter() - t

    mismatches = []
    # artq.sim against the sweep: every field of every run.
    for (scenario, group, scheme, seed), sim, (_, row) in zip(runs, by_sim, df.iterrows()):
        if (row["group"], row["scheme"], row["seed"]) != (group, scheme, seed):
            mismatches.append(f"sweep row order: {group} {scheme} {seed}")
            continue
        for k, v in sim.items():
            if not _same(row[k], v):
                mismatches.append(f"{group} {scheme} seed {seed}: {k}: sim {v!r}, sweep {row[k]!r}")
    # The sweep's CSVs against reproduce's: line for line.
    csv_rows = {}
    for suffix in ("runs", "summary"):
        ours = _read(os.path.join(sweep_dir, f"{experiment}_{suffix}.csv"))
        theirs = _read(os.path.join(reproduce_dir, f"{experiment}_{suffix}.csv"))
        if ours[:1] != theirs[:1]:
            mismatches.append(f"{suffix} CSV: the headers differ")
        elif sorted(ours[1:]) != sorted(theirs[1:]):
            differ = sorted(set(ours[1:]) ^ set(theirs[1:]))
            mismatches.append(f"{suffix} CSV: {len(differ)} lines differ, e.g. {differ[:1]}")
        if suffix == "runs":
            header = theirs[0].split(",")
            for line in theirs[1:]:
                cells = dict(zip(header, line.split(",")))
                csv_rows[(cells["group"], cells["scheme"], int(cells["seed"]))] = cells

    lines = [
        f"{experiment}: {len(runs)} runs ({len(grid['scenarios'])} groups x "
        f"{len(grid['schemes'])} schemes x {len(seeds)} seeds)",
        "group | scheme | seed | " + " | ".join(f"{m} sim / sweep / reproduce" for m in SHOWN),
    ]
    for (_, group, scheme, seed), sim, (_, row) in zip(runs, by_sim, df.iterrows()):
        cells = csv_rows.get((group, scheme, seed), {})
        shown = [f"{sim.get(m)} / {row.get(m)} / {cells.get(m)}" for m in SHOWN]
        lines.append(f"{group} | {scheme} | {seed} | " + " | ".join(shown))
    lines.append(
        "wall time: " + ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items())
    )
    lines.append(
        "identical: every field of every artq.sim result = the sweep's row; "
        f"{experiment}_runs.csv and {experiment}_summary.csv of the sweep = reproduce's"
        if not mismatches
        else f"DIFFERENT: {len(mismatches)} mismatches, first: {mismatches[0]}"
    )
    if not quiet:
        print("\n".join(lines))
    return {"runs": len(runs), "lines": lines, "mismatches": mismatches, "seconds": seconds}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--experiment", default="fig21")
    p.add_argument("--tiny", action="store_true", help="the test suite's scale (else quick)")
    p.add_argument("--out", default=None, help="where the CSVs go (default: a temporary directory)")
    a = p.parse_args()
    result = main(a.experiment, tiny=a.tiny, out=a.out)
    raise SystemExit(1 if result["mismatches"] else 0)
