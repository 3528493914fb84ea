"""artq from Python: the trace-driven QUIC loss-recovery simulator and the
papers' experiments, without a process per run.

A run is described by the scenario keys of ``artq sim --scenario FILE``
(see docs/sim.md) and returns the fields of ``artq sim --json``::

    import artq
    r = artq.sim(scheme="art", workload={"size": "2MB"}, link={"loss": 0.05})
    print(r["fct_ms"], r["n_max"])

Runs release the GIL, so threads run simulations in parallel.
"""

from ._artq import (
    ArtqError,
    ScenarioError,
    __version__,
    default_scenario,
    experiments,
    reproduce,
    schemes,
    sim,
)

__all__ = [
    "ArtqError",
    "ScenarioError",
    "__version__",
    "default_scenario",
    "experiments",
    "reproduce",
    "schemes",
    "sim",
]
