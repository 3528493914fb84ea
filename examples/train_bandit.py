"""Train a small agent on artq's Gymnasium environment: an epsilon-greedy
bandit over ART's redundancy levels, one value per (round, level).

The agent sees ART-DQN's state (artq.env.RetransmissionEnv, decision
"art"); it keys its table on the state's round feature (index 6: round/8)
and learns each level's mean reward (ART journal A.2's reward). Written
against the plain Gymnasium API, so any agent can take its place.

    python examples/train_bandit.py --episodes 20

Run as a test at a tiny size by tests/python/test_env.py.
"""

import argparse

import numpy as np

from artq.env import RetransmissionEnv


class RoundBandit:
    """Epsilon-greedy bandit per retransmission round (1..8+)."""

    def __init__(self, levels: int, epsilon: float = 0.1, seed: int = 0):
        self.values = np.zeros((9, levels))
        self.counts = np.zeros((9, levels))
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def key(obs) -> int:
        return min(int(round(float(obs[6]) * 8)), 8)

    def act(self, obs) -> int:
        if self.rng.random() < self.epsilon:
            return int(self.rng.integers(self.values.shape[1]))
        return int(np.argmax(self.values[self.key(obs)]))

    def learn(self, obs, action: int, reward: float) -> None:
        k = self.key(obs)
        self.counts[k, action] += 1
        self.values[k, action] += (reward - self.values[k, action]) / self.counts[k, action]


def main(episodes=20, scenario=None, r_max=8, quiet=False):
    """Train for `episodes`; returns each episode's total reward."""
    env = RetransmissionEnv(scenario=scenario, r_max=r_max)
    agent = RoundBandit(env.action_space.n)
    totals = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode + 1)
        total, done = 0.0, False
        while not done:
            action = agent.act(obs)
            next_obs, reward, terminated, truncated, info = env.step(action)
            # The reward arriving now settles earlier rounds; crediting the
            # action just taken is the bandit's simplification.
            agent.learn(obs, action, reward)
            total += reward
            obs, done = next_obs, terminated or truncated
        totals.append(total)
        if not quiet:
            r = info.get("result", {})
            print(f"episode {episode + 1}: reward {total:.2f}, {info['decisions']} decisions, "
                  f"fct {r.get('fct_ms', float('nan')):.0f} ms, "
                  f"levels for round 1: {np.round(agent.values[1], 2)}")
    return totals


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--loss", type=float, default=0.02)
    a = p.parse_args()
    main(a.episodes, {"workload": {"size": "1MB"}, "link": {"bw": 100, "rtt": 30, "loss": a.loss}})
