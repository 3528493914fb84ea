"""Speed of the Python package on this machine (run by hand; prints
figures, asserts nothing):

1. environment steps per second for ART's decisions on a 100 Mbit/s,
   30 ms, 2% loss path (artq/Retransmission-v0's default scenario, 1 MB
   per episode, random actions);
2. the speed-up of a sweep of N runs on a local Ray over the same runs one
   after another through artq.sim, in the same process.

    python examples/bench_python.py [--runs 200] [--episodes 20]
"""

import argparse
import os
import time

import numpy as np

import artq
from artq.env import RetransmissionEnv
from artq.grid import grid_runs


def env_speed(episodes: int) -> float:
    env = RetransmissionEnv()
    rng = np.random.default_rng(0)
    steps = 0
    start = time.perf_counter()
    for e in range(episodes):
        env.reset(seed=e + 1)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            steps += 1
            done = terminated or truncated
    elapsed = time.perf_counter() - start
    print(f"env: {steps} steps in {elapsed:.2f} s over {episodes} episodes: {steps / elapsed:.0f} steps/s "
          f"(the simulated transfer included)")
    return steps / elapsed


def sweep_speedup(runs: int) -> float:
    import ray

    seeds = max(1, runs // 6)
    grid = {
        "base": {"workload": {"size": "300KB"}, "link": {"bw": 50, "rtt": 30}},
        "scenarios": {"loss=1%": {"link": {"loss": 0.01}}, "loss=5%": {"link": {"loss": 0.05}}},
        "schemes": ["quic", "art", "or3"],
    }
    work = grid_runs(grid, range(1, seeds + 1))
    start = time.perf_counter()
    for scenario, _, _, _ in work:
        artq.sim(scenario)
    serial = time.perf_counter() - start
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    start = time.perf_counter()
    artq.sweep(grid, seeds=seeds)  # warm-up: workers start and import artq
    warm = time.perf_counter() - start
    start = time.perf_counter()
    artq.sweep(grid, seeds=seeds)
    on_ray = time.perf_counter() - start
    ray.shutdown()
    print(f"sweep: {len(work)} runs one after another {serial:.2f} s; on local Ray ({os.cpu_count()} CPUs) "
          f"{on_ray:.2f} s (first sweep, with worker start-up, {warm:.2f} s): speed-up {serial / on_ray:.2f}x")
    return serial / on_ray


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--episodes", type=int, default=20)
    a = p.parse_args()
    env_speed(a.episodes)
    sweep_speedup(a.runs)
