"""artq.sweep on a local Ray: the same rows as artq.sim, the CSVs of artq
reproduce, and the plotting example at a tiny size. One Ray session for the
whole module (Ray's start-up is the expensive part).

Run by crates/artq/tests/python_package.rs (unittest discovery over
tests/python).
"""

import csv
import io
import math
import os
import shutil
import sys
import tempfile
import unittest

import ray

import artq
from artq.grid import flatten, grid_runs
from progress_terminal import on_a_terminal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

# 2 loss rates x 2 schemes x 5 seeds = 20 small runs.
GRID = {
    "base": {"workload": {"size": "100KB"}, "link": {"bw": 20, "rtt": 20}},
    "scenarios": {"loss=1%": {"link": {"loss": 0.01}}, "loss=5%": {"link": {"loss": 0.05}}},
    "schemes": ["quic", "art"],
}


def setUpModule():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)


def tearDownModule():
    ray.shutdown()


def missing(x):
    return x is None or (isinstance(x, float) and math.isnan(x))


def same(a, b):
    """Equal, or both absent (pandas holds a missing value as NaN)."""
    return (missing(a) and missing(b)) or a == b


class Sweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="artq-sweep-")
        cls.df = artq.sweep(GRID, seeds=5, out=cls.out, name="tiny")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.out, ignore_errors=True)

    def test_twenty_runs_on_ray_give_the_rows_of_artq_sim(self):
        self.assertEqual(len(self.df), 20)
        self.assertTrue((self.df["error"] == "").all(), self.df["error"].tolist())
        runs = grid_runs(GRID, range(1, 6))
        for (scenario, group, scheme, seed), (_, row) in zip(runs, self.df.iterrows()):
            self.assertEqual((row["group"], row["scheme"], row["seed"]), (group, scheme, seed))
            expected = flatten(artq.sim(scenario))
            for k, v in expected.items():
                self.assertTrue(same(row[k], v), f"{group} {scheme} seed {seed}: {k} {row[k]!r} != {v!r}")

    def test_writes_the_csvs_of_artq_reproduce(self):
        runs_csv = os.path.join(self.out, "tiny_runs.csv")
        summary_csv = os.path.join(self.out, "tiny_summary.csv")
        with open(runs_csv) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 20)
        # The columns of artq reproduce's NAME_runs.csv: the same writer.
        self.assertEqual(list(rows[0].keys()), ["experiment"] + artq._artq.run_columns())
        by_key = {(r["group"], r["scheme"], int(r["seed"])): r for r in rows}
        for _, row in self.df.iterrows():
            r = by_key[(row["group"], row["scheme"], row["seed"])]
            self.assertAlmostEqual(float(r["fct_ms"]), row["fct_ms"], places=5)
            self.assertEqual(int(float(r["replicas"])), row["replicas"])
        with open(summary_csv) as f:
            summary = list(csv.DictReader(f))
        self.assertEqual([(s["group"], s["scheme"]) for s in summary],
                         [("loss=1%", "quic"), ("loss=1%", "art"), ("loss=5%", "quic"), ("loss=5%", "art")])
        self.assertTrue(all(s["runs"] == "5" and s["failed"] == "0" for s in summary))

    def test_bad_grids_fail_before_any_task(self):
        with self.assertRaises(artq.ScenarioError):
            artq.sweep({"scenarios": [{"bogus": 1}], "schemes": ["quic"]})
        with self.assertRaises(artq.ScenarioError):
            artq.sweep({"scenarios": [{}], "schemes": ["teleport"]})
        with self.assertRaises(artq.ScenarioFileNotFound):
            artq.sweep({"scenarios": [{"link": {"trace": "/nonexistent/t.down"}}]})
        for grid, seeds in (({"scenario": [{}]}, 1), ({"scenarios": [5]}, 1), ("grid", 1),
                            ({}, 0), ({}, "many"), ({}, [1.5])):
            with self.assertRaises(artq.GridError, msg=repr((grid, seeds))):
                artq.sweep(grid, seeds=seeds)
        for bad in ({"name": 5}, {"out": 5}, {"address": 5}, {"num_cpus": "2"}):
            with self.assertRaises(artq.ArtqTypeError, msg=repr(bad)):
                artq.sweep({}, **bad)
        with self.assertRaises(artq.ArtqValueError):
            artq.sweep({}, num_cpus=0)
        blocked = os.path.join(self.out, "tiny_runs.csv")
        with self.assertRaises(artq.OutputError):
            artq.sweep({"base": GRID["base"], "schemes": ["quic"]}, out=os.path.join(blocked, "sub"),
                       progress=False)

    def test_a_bar_on_a_terminal_and_none_elsewhere(self):
        small = {"base": GRID["base"], "schemes": ["quic", "art"]}
        df, shown = on_a_terminal(lambda: artq.sweep(small, seeds=2, name="barred"))
        self.assertEqual(len(df), 4)
        self.assertIn("barred: 100%|", shown)
        self.assertIn("4/4", shown)
        plain = io.StringIO()
        saved = sys.stderr
        sys.stderr = plain
        try:
            df = artq.sweep(small, seeds=2, name="plain")
        finally:
            sys.stderr = saved
        self.assertEqual(len(df), 4)
        self.assertEqual(plain.getvalue(), "")


class SweepExample(unittest.TestCase):
    def test_the_plot_example_runs_at_tiny_size(self):
        import sweep_plot

        out = tempfile.mkdtemp(prefix="artq-sweep-plot-")
        try:
            df, path = sweep_plot.main(losses=(0.02, 0.05), seeds=1, size="100KB", out=out)
            self.assertEqual(len(df), 6)
            self.assertEqual(sorted(df["scheme"].unique()), ["art", "or3", "quic"])
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertTrue(os.path.exists(os.path.join(out, "sweep_runs.csv")))
        finally:
            shutil.rmtree(out, ignore_errors=True)


class ThreeWays(unittest.TestCase):
    def test_an_experiment_gives_identical_rows_three_ways(self):
        import three_ways

        out = tempfile.mkdtemp(prefix="artq-three-ways-")
        try:
            r = three_ways.main("fig21", tiny=True, out=out, quiet=True)
            # Fig. 21 at tiny scale: 2 file sizes x 5 schemes x 1 seed.
            self.assertEqual(r["runs"], 10)
            self.assertEqual(r["mismatches"], [])
            self.assertTrue(r["lines"][-1].startswith("identical"), r["lines"][-1])
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_experiment_grid_is_the_experiments_runs(self):
        grid, seeds = artq.experiment_grid("fig21", tiny=True)
        self.assertEqual(seeds, [1])
        self.assertEqual(grid["schemes"], ["quic", "or3", "2n+1", "art", "art-or3start"])
        cases = artq._artq.experiment_cases("fig21", tiny=True)["cases"]
        self.assertEqual(len(grid_runs(grid, seeds)), len(cases))
        with self.assertRaises(ValueError):
            artq.experiment_grid("fig99")


if __name__ == "__main__":
    unittest.main()
