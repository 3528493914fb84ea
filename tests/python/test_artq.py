"""The `artq` Python package against the command line it mirrors.

Run by crates/artq/tests/python_package.rs with the venv's Python that
.ci/run installed the package into (`pip install .`); ARTQ_BIN names the
`artq` binary of the same build. Standard library only (unittest).
"""

import ast
import inspect
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import artq
from artq import _artq
from artq.results import SimResult
from progress_terminal import on_a_terminal

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


# Every exception class of the package and the built-in it stands for.
EXCEPTIONS = {
    "ArtqError": Exception,
    "ArtqValueError": ValueError,
    "ArtqTypeError": TypeError,
    "ScenarioError": ValueError,
    "ScenarioFileNotFound": FileNotFoundError,
    "ExperimentError": ValueError,
    "GridError": ValueError,
    "EnvError": ValueError,
    "RunError": RuntimeError,
    "OutputError": OSError,
    "MissingExtraError": ImportError,
}


class OneExceptionHierarchy(unittest.TestCase):
    """``except artq.ArtqError`` catches whatever the package raises on bad
    input, and each class is also its built-in (tests/python/test_env.py
    and test_sweep.py add the environment's and the sweep's)."""

    def test_every_class_is_an_artq_error_and_its_builtin(self):
        exported = {n for n in dir(artq) if isinstance(getattr(artq, n), type)
                    and issubclass(getattr(artq, n), BaseException)}
        self.assertEqual(exported, set(EXCEPTIONS))
        for name, builtin in EXCEPTIONS.items():
            cls = getattr(artq, name)
            self.assertTrue(issubclass(cls, artq.ArtqError), name)
            self.assertTrue(issubclass(cls, builtin), name)
            self.assertIs(getattr(_artq, name), cls)
            self.assertEqual(f"{cls.__module__}.{cls.__qualname__}", f"artq.{name}")
        for name in ("ScenarioError", "ExperimentError", "GridError", "EnvError"):
            self.assertTrue(issubclass(getattr(artq, name), artq.ArtqValueError), name)

    def test_exceptions_survive_pickling(self):
        # Ray sends a task's exception to the caller pickled.
        import pickle

        for name in EXCEPTIONS:
            e = getattr(artq, name)("a message")
            back = pickle.loads(pickle.dumps(e))
            self.assertIs(type(back), type(e))
            self.assertEqual(str(back), "a message")

    def test_artq_error_catches_every_bad_input(self):
        out = tempfile.mkdtemp(prefix="artq-bad-out-")
        try:
            blocked = os.path.join(out, "a-file")
            with open(blocked, "w") as f:
                f.write("not a directory")
            cases = [
                (lambda: artq.sim(bogus=1), artq.ScenarioError),
                (lambda: artq.sim(scheme="teleport"), artq.ScenarioError),
                (lambda: artq.sim(link={"trace": "/nonexistent/t.down"}), artq.ScenarioFileNotFound),
                (lambda: artq.sim([1, 2]), artq.ArtqTypeError),
                (lambda: artq.sim("art"), artq.ArtqTypeError),
                (lambda: artq.sim({}, {}), artq.ArtqTypeError),
                (lambda: artq.sim(link=[1], loss=0.1), artq.ScenarioError),
                (lambda: artq.sim(seed=object()), artq.ScenarioError),
                (lambda: artq.sim(workload={"size": "10KB"}, time_limit=0.001), artq.RunError),
                (lambda: artq.schemes(1), artq.ArtqTypeError),
                (lambda: artq.default_scenario(x=1), artq.ArtqTypeError),
                (lambda: artq.reproduce(["fig99"], progress=False), artq.ExperimentError),
                (lambda: artq.reproduce("fig21", progress=False), artq.ArtqTypeError),
                (lambda: artq.reproduce([21], progress=False), artq.ArtqTypeError),
                (lambda: artq.reproduce(5, progress=False), artq.ArtqTypeError),
                (lambda: artq.reproduce([], jobs=0, progress=False), artq.ArtqValueError),
                (lambda: artq.reproduce([], jobs="2", progress=False), artq.ArtqTypeError),
                (lambda: artq.reproduce([], out=blocked, progress=False), artq.OutputError),
                (lambda: artq.experiment_grid("fig99"), artq.ExperimentError),
                (lambda: artq.experiment_grid(None), artq.ArtqTypeError),
                (lambda: artq.grid_runs([], [1]), artq.GridError),
                (lambda: artq.grid_runs({"scenario": []}, [1]), artq.GridError),
                (lambda: artq.grid_runs({"scenarios": [1]}, [1]), artq.GridError),
                (lambda: artq.grid_runs({"scenarios": 5}, [1]), artq.GridError),
                (lambda: artq.grid_runs({"base": 5}, [1]), artq.GridError),
                (lambda: artq.grid_runs({"schemes": [1]}, [1]), artq.GridError),
                (lambda: artq.grid_runs({}, []), artq.GridError),
                (lambda: artq.grid_runs({}, ["1"]), artq.GridError),
                (lambda: artq.grid_runs({}, [-1]), artq.GridError),
                (lambda: artq.grid_runs({}, None), artq.GridError),
                (lambda: artq.write_csvs([{"x": 1}], out), artq.GridError),
                (lambda: artq.write_csvs(5, out), artq.GridError),
                (lambda: artq.write_csvs([], os.path.join(blocked, "sub")), artq.OutputError),
                (lambda: artq.write_csvs([], None), artq.ArtqTypeError),
                (lambda: artq.grid.flatten(None), artq.GridError),
            ]
            for i, (call, expected) in enumerate(cases):
                with self.subTest(case=i, expected=expected.__name__):
                    with self.assertRaises(artq.ArtqError) as e:
                        call()
                    self.assertIsInstance(e.exception, expected)
                    self.assertTrue(str(e.exception))
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_every_raise_in_the_package_raises_an_artq_error(self):
        """The pure-Python part raises nothing but artq's classes (a bare
        ``raise`` re-raises what it caught, which is one already)."""
        package = os.path.dirname(artq.__file__)
        sources = sorted(f for f in os.listdir(package) if f.endswith(".py"))
        self.assertIn("env.py", sources)
        self.assertIn("grid.py", sources)
        checked = 0
        for source in sources:
            with open(os.path.join(package, source)) as f:
                tree = ast.parse(f.read(), source)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Raise) or node.exc is None:
                    continue
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                name = exc.attr if isinstance(exc, ast.Attribute) else getattr(exc, "id", None)
                with self.subTest(source=source, line=node.lineno):
                    self.assertIn(name, EXCEPTIONS, f"{source}:{node.lineno} raises {name}")
                checked += 1
        self.assertGreater(checked, 20)


class StubsMatchTheModule(unittest.TestCase):
    """_artq.pyi declares what the native module defines: the same names,
    parameters and defaults, the same first docstring line."""

    def stubs(self):
        path = os.path.join(os.path.dirname(artq.__file__), "_artq.pyi")
        with open(path) as f:
            return ast.parse(f.read())

    def check_function(self, stub, native):
        params = [p for p in inspect.signature(native).parameters.values()]
        args = stub.args
        declared = [(a.arg, None) for a in args.posonlyargs + args.args]
        defaults = [ast.literal_eval(d) for d in args.defaults]
        for i, d in enumerate(defaults):
            k = len(declared) - len(defaults) + i
            declared[k] = (declared[k][0], d)
        if args.vararg:
            declared.append(("*" + args.vararg.arg, None))
        if args.kwarg:
            declared.append(("**" + args.kwarg.arg, None))
        real = []
        for p in params:
            if p.kind == p.VAR_POSITIONAL:
                real.append(("*" + p.name, None))
            elif p.kind == p.VAR_KEYWORD:
                real.append(("**" + p.name, None))
            else:
                real.append((p.name, None if p.default is p.empty else p.default))
        for params in (declared, real):
            if params and params[0][0] == "self":
                del params[0]
        self.assertEqual(declared, real, stub.name)
        self.assertEqual(ast.get_docstring(stub).splitlines()[0], native.__doc__.splitlines()[0], stub.name)

    def test_names_signatures_and_summaries(self):
        tree = self.stubs()
        declared = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                declared.add(node.name)
                self.check_function(node, getattr(_artq, node.name))
            elif isinstance(node, ast.ClassDef):
                declared.add(node.name)
                cls = getattr(_artq, node.name)
                self.assertEqual(ast.get_docstring(node).splitlines()[0], cls.__doc__.splitlines()[0], node.name)
                if issubclass(cls, BaseException):
                    self.assertEqual([ast.unparse(b) for b in node.bases], [b.__name__ for b in cls.__bases__])
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        self.check_function(item, getattr(cls, item.name))
            elif isinstance(node, ast.AnnAssign):
                declared.add(node.target.id)
        public = {n for n in dir(_artq) if not n.startswith("_")} | {"__version__"}
        self.assertEqual(declared, public)


# Scenarios that together report every key SimResult declares.
RESULT_SCENARIOS = [
    {"workload": {"size": "100KB"}, "link": {"loss": 0.05}},
    {"workload": {"size": "20KB", "files": 3}, "link": {"loss": 0.05, "ecn_mark": 5}, "ecn": True},
    {"cc": "bbr", "workload": {"kind": "live", "bitrate": 1000, "duration": 2},
     "link": {"bw": 8, "rtt": 50, "loss": 0.1}},
    {"workload": {"kind": "dash", "video_duration": 8}, "link": {"bw": 20, "rtt": 30, "loss": 0.02}},
    {"workload": {"kind": "rpc", "rpcs": 20}, "link": {"loss": 0.05}},
    {"scheme": "rcp", "workload": {"kind": "messages", "messages": 200, "message_rate": 200, "drain": 300},
     "link": {"bw": 20, "rtt": 30, "loss": 0.05}},
]


class ResultTypes(unittest.TestCase):
    """artq.results declares the keys the real dicts have, no more, no
    fewer: a field added to (or removed from) ``artq sim --json`` fails
    here until the declaration follows."""

    def assert_declared(self, d, typed, where):
        keys = set(d)
        missing = typed.__required_keys__ - keys
        extra = keys - typed.__required_keys__ - typed.__optional_keys__
        self.assertFalse(missing, f"{where}: declared but absent: {sorted(missing)}")
        self.assertFalse(extra, f"{where}: returned but not declared: {sorted(extra)}")

    def test_sim_results_have_exactly_the_declared_keys(self):
        seen = set()
        for scenario in RESULT_SCENARIOS:
            with self.subTest(scenario=scenario):
                r = artq.sim(scenario, seed=2)
                self.assert_declared(r, SimResult, json.dumps(scenario))
                for key in ("t_wait_ms", "recovery_latency_ms", "fct_ms_per_file", "rpc_fct_ms",
                            "recovery_latency_multi_ms"):
                    if r.get(key) is not None:
                        self.assertEqual(set(r[key]), set(artq.results.Summary.__required_keys__), key)
                seen |= set(r)
        never = (SimResult.__required_keys__ | SimResult.__optional_keys__) - seen
        self.assertFalse(never, f"declared keys no scenario returned: {sorted(never)}")

    def test_run_case_and_experiment_cases(self):
        from artq.results import Case, ExperimentCases, RunCase

        row = _artq.run_case({"workload": {"size": "50KB"}}, "g", "quic", 1)
        self.assert_declared(row, RunCase, "run_case")
        self.assert_declared(row["sim"], SimResult, "run_case sim")
        failed = _artq.run_case({"workload": {"size": "1MB"}, "time_limit": 0.001}, "g", "quic", 1)
        self.assert_declared(failed, RunCase, "failed run_case")
        self.assertIsNone(failed["sim"])
        self.assertTrue(failed["error"])
        exp = _artq.experiment_cases("fig21", tiny=True)
        self.assert_declared(exp, ExperimentCases, "experiment_cases")
        for case in exp["cases"]:
            self.assert_declared(case, Case, "experiment case")


class Progress(unittest.TestCase):
    """artq.reproduce shows a tqdm bar when stderr is a terminal, plain
    lines otherwise, nothing with progress=False."""

    EXPERIMENT = "fig21"

    def run_with_stderr(self, stream, **kwargs):
        out = tempfile.mkdtemp(prefix="artq-progress-")
        saved = sys.stderr
        sys.stderr = stream
        try:
            artq.reproduce([self.EXPERIMENT], tiny=True, out=out, jobs=1, **kwargs)
        finally:
            sys.stderr = saved
            shutil.rmtree(out, ignore_errors=True)

    def test_a_bar_on_a_terminal(self):
        _, shown = on_a_terminal(lambda: self.run_with_stderr(sys.stderr))
        # tqdm's bar: "fig21: 100%|██████████| 10/10 [00:01<00:00, 7.5run/s]"
        self.assertIn(f"{self.EXPERIMENT}: 100%|", shown)
        self.assertIn("10/10", shown)
        self.assertIn("run/s", shown)
        self.assertNotIn(f"[{self.EXPERIMENT}] 1/10", shown)

    def test_plain_lines_elsewhere_and_none_when_off(self):
        plain = io.StringIO()
        self.run_with_stderr(plain)
        lines = plain.getvalue().splitlines()
        self.assertEqual(len(lines), 10, lines)
        self.assertTrue(all(line.startswith(f"[{self.EXPERIMENT}] ") for line in lines), lines)
        self.assertIn(f"[{self.EXPERIMENT}] 10/10 ", plain.getvalue())
        self.assertNotIn("%|", plain.getvalue())
        quiet = io.StringIO()
        self.run_with_stderr(quiet, progress=False)
        self.assertEqual(quiet.getvalue(), "")

    def test_interleaved_experiments_keep_their_own_bars(self):
        # The runs of two experiments finish interleaved (one queue).
        made = {}

        class FakeBar:
            def __init__(self, total, desc):
                self.total, self.n, self.closed = total, 0, False
                made[desc] = self

            def update(self, k):
                self.n += k

            def write(self, line, file=None):
                pass

            def close(self):
                self.closed = True

        reporter = artq._Reporter()
        reporter._bar_of = FakeBar
        calls = [("a", 1, 2), ("b", 1, 3), ("a", 2, 2), ("b", 2, 3), ("b", 3, 3)]
        for name, done, total in calls:
            reporter(name, done, total, "g", "quic", 1, None)
            if name == "a" and done == 1:
                self.assertFalse(made["a"].closed)
        self.assertEqual(sorted(made), ["a", "b"])
        self.assertEqual((made["a"].n, made["a"].total, made["a"].closed), (2, 2, True))
        self.assertEqual((made["b"].n, made["b"].total, made["b"].closed), (3, 3, True))
        # Off a terminal (no bars), one line per run, whatever the order.
        lines = io.StringIO()
        plain = artq._Reporter()
        plain._bar_of = lambda total, desc: None
        saved = sys.stderr
        sys.stderr = lines
        try:
            for name, done, total in calls:
                plain(name, done, total, "g", "quic", 1, None)
        finally:
            sys.stderr = saved
        self.assertEqual(
            lines.getvalue().splitlines(),
            [f"[{n}] {d}/{t} g quic seed 1" for n, d, t in calls],
        )

    def test_an_exception_in_the_progress_callback_is_raised(self):
        def boom(*args):
            raise KeyError("from the callback")

        out = tempfile.mkdtemp(prefix="artq-progress-")
        try:
            with self.assertRaises(KeyError):
                _artq.reproduce([self.EXPERIMENT], tiny=True, out=out, jobs=1, on_run=boom)
        finally:
            shutil.rmtree(out, ignore_errors=True)


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
