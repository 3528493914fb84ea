"""artq from Python: the trace-driven QUIC loss-recovery simulator and the
papers' experiments, without a process per run.

A run is described by the scenario keys of ``artq sim --scenario FILE``
(see docs/sim.md) and returns the fields of ``artq sim --json``::

    import artq
    r = artq.sim(scheme="art", workload={"size": "2MB"}, link={"loss": 0.05})
    print(r["fct_ms"], r["n_max"])

Runs release the GIL, so threads run simulations in parallel.

``artq.env.RetransmissionEnv`` (Gymnasium id ``artq/Retransmission-v0``,
registered when gymnasium is installed) pauses the real transport at every
retransmission decision; ``artq.sweep`` fans runs out on Ray.
"""

from ._artq import (
    ArtqError,
    ScenarioError,
    ScenarioFileNotFound,
    __version__,
    decisions,
    default_scenario,
    experiments,
    reproduce,
    rewards,
    schemes,
    sim,
)

__all__ = [
    "ArtqError",
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
except ImportError:  # the environment needs gymnasium; artq.sim does not
    _gym = None
if _gym is not None and "artq/Retransmission-v0" not in _gym.registry:
    _gym.register(id="artq/Retransmission-v0", entry_point="artq.env:RetransmissionEnv")


from .grid import experiment_grid, grid_runs, sweep, write_csvs  # noqa: E402 (ray and pandas load on use)

__all__ += ["experiment_grid", "grid_runs", "sweep", "write_csvs"]
