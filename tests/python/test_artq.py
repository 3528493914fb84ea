"""The `artq` Python package against the command line it mirrors.

Run by crates/artq/tests/python_package.rs with the venv's Python that
.ci/run installed the package into (`pip install .`); ARTQ_BIN names the
`artq` binary of the same build. Standard library only (unittest).
"""

import json
import os
import subprocess
import threading
import time
import unittest

import artq

ARTQ_BIN = os.environ.get("ARTQ_BIN", "artq")

SMALL = {"scheme": "art", "seed": 3, "workload": {"size": "300KB"}, "link": {"loss": 0.05}}


def cli_json(*args):
    out = subprocess.run(
        [ARTQ_BIN, "sim", "--json", *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def without_cpu(result):
    return {k: v for k, v in result.items() if k != "cpu_ms"}


class SimMatchesTheCommandLine(unittest.TestCase):
    def test_same_result_as_artq_sim_json(self):
        py = artq.sim(SMALL)
        cli = cli_json("--scheme", "art", "--seed", "3", "--size", "300KB", "--loss", "0.05")
        self.assertEqual(without_cpu(py), without_cpu(cli))

    def test_keywords_override_the_scenario_dict(self):
        a = artq.sim(SMALL, seed=4)
        b = artq.sim(dict(SMALL, seed=4))
        self.assertEqual(without_cpu(a), without_cpu(b))
        self.assertEqual(a["seed"], 4)

    def test_a_scenario_file_and_a_dict_agree(self):
        scenario = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"artq-py-{os.getpid()}.toml")
        with open(scenario, "w") as f:
            f.write('scheme = "art"\nseed = 3\n[workload]\nsize = "300KB"\n[link]\nloss = 0.05\n')
        try:
            cli = cli_json("--scenario", scenario)
        finally:
            os.remove(scenario)
        self.assertEqual(without_cpu(artq.sim(SMALL)), without_cpu(cli))

    def test_link_keys_as_keywords(self):
        a = artq.sim(scheme="art", seed=3, loss=0.05, workload={"size": "300KB"})
        self.assertEqual(without_cpu(a), without_cpu(artq.sim(SMALL)))
        b = artq.sim(dict(SMALL, link={"loss": 0.05, "rtt": 60}), loss=0.02)
        self.assertEqual(without_cpu(b), without_cpu(artq.sim(dict(SMALL, link={"loss": 0.02, "rtt": 60}))))

    def test_default_scenario_lists_every_key(self):
        d = artq.default_scenario()
        for key in ("scheme", "cc", "seed", "workload", "link"):
            self.assertIn(key, d)
        self.assertEqual(d["scheme"], "quic")


class Errors(unittest.TestCase):
    """Bad input raises ValueError or FileNotFoundError with the command
    line's message (the CLI's own stderr is the reference), never crashes."""

    def cli_error(self, *args):
        p = subprocess.run([ARTQ_BIN, "sim", "--json", *args], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        return p.stderr

    def test_unknown_key(self):
        with self.assertRaises(ValueError) as e:
            artq.sim(bogus=1)
        self.assertIsInstance(e.exception, artq.ScenarioError)
        self.assertIn("bogus", str(e.exception))

    def test_unknown_scheme_names_the_known_ones(self):
        with self.assertRaises(ValueError) as e:
            artq.sim(scheme="teleport", workload={"size": "1KB"})
        self.assertIn("teleport", str(e.exception))
        self.assertIn("art", str(e.exception))
        self.assertIn(str(e.exception), self.cli_error("--scheme", "teleport", "--size", "1KB"))

    def test_negative_loss(self):
        with self.assertRaises(ValueError) as e:
            artq.sim(workload={"size": "1KB"}, link={"loss": -0.1})
        self.assertIn("loss", str(e.exception))
        self.assertIn(str(e.exception), self.cli_error("--loss=-0.1", "--size", "1KB"))

    def test_bad_value_and_non_data(self):
        with self.assertRaises(ValueError):
            artq.sim(workload={"size": "5 parsecs"})
        with self.assertRaises(ValueError):
            artq.sim(seed=object())
        with self.assertRaises(ValueError):
            artq.sim(seed=-1)
        with self.assertRaises(ValueError):
            artq.reproduce(["fig99"], progress=False)

    def test_missing_trace(self):
        with self.assertRaises(FileNotFoundError) as e:
            artq.sim(workload={"size": "1KB"}, link={"trace": "/nonexistent/trace.down"})
        self.assertIsInstance(e.exception, artq.ScenarioFileNotFound)
        self.assertIn("/nonexistent/trace.down", str(e.exception))
        self.assertIn(
            str(e.exception), self.cli_error("--trace", "/nonexistent/trace.down", "--size", "1KB")
        )

    def test_the_interpreter_survives_a_run_of_bad_inputs(self):
        for bad in ({"scheme": ""}, {"link": {"rtt": -5}}, {"workload": {"kind": "nope"}},
                    {"link": {"bw": 0}}, {"time_limit": -1}, {"workload": []}):
            with self.assertRaises(ValueError, msg=repr(bad)):
                artq.sim(bad)
        self.assertIn("fct_ms", artq.sim(workload={"size": "10KB"}))


class Registry(unittest.TestCase):
    def test_schemes_and_experiments(self):
        names = [n for n, _ in artq.schemes()]
        for s in ("quic", "art", "fixed:R", "fec:K"):
            self.assertIn(s, names)
        exps = dict(artq.experiments())
        self.assertIn("fig19", exps)
        self.assertTrue(all(isinstance(t, str) and t for t in exps.values()))

    def test_unknown_experiment(self):
        with self.assertRaises(ValueError) as e:
            artq.reproduce(["fig99"], progress=False)
        self.assertIn("fig19", str(e.exception))


class ReleasesTheGil(unittest.TestCase):
    def test_another_thread_runs_during_a_simulation(self):
        ticks = []
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.001)

        t = threading.Thread(target=tick)
        t.start()
        try:
            time.sleep(0.02)
            start = time.monotonic()
            artq.sim(workload={"size": "4MB"}, link={"loss": 0.02})
            end = time.monotonic()
        finally:
            stop.set()
            t.join()
        during = [x for x in ticks if start < x < end]
        # While the GIL is held the ticker cannot run at all; released, it
        # ticks every millisecond or so.
        self.assertGreater(end - start, 0.01)
        self.assertGreaterEqual(len(during), 3, f"{len(during)} ticks in {end - start:.3f} s")


if __name__ == "__main__":
    unittest.main()
