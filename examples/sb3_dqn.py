"""Train stable-baselines3's DQN on artq's environment (run by hand: not
part of the test suite; needs `pip install stable-baselines3`).

    python examples/sb3_dqn.py --steps 20000 --save art-dqn-sb3

The environment is artq/Retransmission-v0 with ART's decision (ART-DQN's
state, A.2's reward) on a 100 Mbit/s, 30 ms, 2% loss path; the trained
agent is then run greedily for one episode and its run's metrics printed.
"""

import argparse

import gymnasium as gym

import artq  # noqa: F401  (registers artq/Retransmission-v0)


def main(steps: int, save: str):
    from stable_baselines3 import DQN

    env = gym.make("artq/Retransmission-v0")
    model = DQN("MlpPolicy", env, learning_starts=500, exploration_fraction=0.2, verbose=1, seed=1)
    model.learn(total_timesteps=steps)
    model.save(save)
    obs, _ = env.reset(seed=1000)
    done = False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    r = info["result"]
    print(f"greedy episode: fct {r['fct_ms']:.0f} ms, mean recovery {r['recovery_latency_ms']['mean']:.1f} ms, "
          f"extra replicas {r['extra_replicas']}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--save", default="art-dqn-sb3")
    a = p.parse_args()
    main(a.steps, a.save)
