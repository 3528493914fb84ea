"""The artq package installed without extras (`pip install artq`, in a venv
of its own): run by crates/artq/tests/python_package.rs
(`base_install_in_a_fresh_venv`) with that venv's Python. Exits non-zero,
saying why, when anything differs; standard library only.

- the venv is bare: none of the extras' packages is importable (else this
  check proves nothing);
- tqdm, the package's one dependency, came with it;
- the package works: a small simulation runs, a bad scenario raises an
  artq.ArtqError;
- `import artq.env` raises an ImportError (artq.MissingExtraError, an
  artq.ArtqError) naming `pip install 'artq[env]'`, and `artq.sweep(...)`
  one naming `artq[sweep]`;
- the installed metadata declares the extras env, sweep and plot with
  their packages.
"""

import importlib
import importlib.metadata
import importlib.util
import re
import sys

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


extras_packages = {"gymnasium": "env", "numpy": "env", "ray": "sweep", "pandas": "sweep",
                   "matplotlib": "plot"}
for module, extra in extras_packages.items():
    check(importlib.util.find_spec(module) is None,
          f"{module} (artq[{extra}]) is not installed in the bare venv")
check(importlib.util.find_spec("tqdm") is not None, "tqdm came with the package")

import artq  # noqa: E402

check(artq.__file__.startswith(sys.prefix), f"artq is the installed package ({artq.__file__})")
r = artq.sim(scheme="art", seed=1, workload={"size": "50KB"}, loss=0.05)
check(r["bytes"] == 50_000 and r["scheme"] == "art", "artq.sim runs a 50 KB transfer")
try:
    artq.sim(bogus=1)
    check(False, "a bad scenario raises")
except artq.ArtqError as e:
    check(isinstance(e, artq.ScenarioError) and isinstance(e, ValueError) and "bogus" in str(e),
          "a bad scenario raises artq.ScenarioError, an ArtqError and a ValueError")

try:
    import artq.env  # noqa: F401

    check(False, "import artq.env without gymnasium raises")
except ImportError as e:
    check(isinstance(e, artq.MissingExtraError) and isinstance(e, artq.ArtqError),
          "import artq.env raises artq.MissingExtraError, an ImportError and an ArtqError")
    check("pip install 'artq[env]'" in str(e), f"its message names artq[env]: {e}")
check("artq.env" not in sys.modules, "a failed import of artq.env leaves no module behind")

try:
    artq.sweep({"scenarios": [{}], "schemes": ["quic"]})
    check(False, "artq.sweep without ray raises")
except ImportError as e:
    check(isinstance(e, artq.MissingExtraError), "artq.sweep raises artq.MissingExtraError")
    check("pip install 'artq[sweep]'" in str(e), f"its message names artq[sweep]: {e}")

meta = importlib.metadata.metadata("artq")
check(sorted(meta.get_all("Provides-Extra") or []) == ["env", "plot", "sweep"],
      f"the extras are env, plot, sweep: {meta.get_all('Provides-Extra')}")
requires = meta.get_all("Requires-Dist") or []
for package, extra in extras_packages.items():
    check(any(r.startswith(package) and re.search(rf"extra\s*==\s*[\"']{extra}[\"']", r) for r in requires),
          f"artq[{extra}] requires {package}")
check(any(r.startswith("tqdm") and "extra" not in r for r in requires),
      "the package itself requires tqdm")

if failures:
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
