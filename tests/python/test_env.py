"""artq.env.RetransmissionEnv: the Gymnasium checker, repeatable episodes,
the decisions' meaning, and the training-loop example at tiny size.

Run by crates/artq/tests/python_package.rs (unittest discovery over
tests/python) with the venv's Python into which .ci/run installed the
package and tests/python/requirements.txt.
"""

import os
import sys
import unittest

import warnings

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

import artq
from artq import _artq
from artq.env import RetransmissionEnv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

MESSAGES = {"kind": "messages", "messages": 200, "message_rate": 200, "drain": 300}

# Small and lossy: tens of decisions per episode, fractions of a second.
TINY = {"workload": {"size": "200KB"}, "link": {"bw": 20, "rtt": 30, "loss": 0.05}}

# AutoRec's default setting (autorec.md §5.1), a 4 s live stream: a few
# decision intervals.
LIVE = {
    "cc": "bbr",
    "workload": {"kind": "live", "bitrate": 7000, "duration": 4},
    "link": {"bw": 8, "rtt": 50, "loss": 0.05, "queue_bytes": 500000},
}


def trajectory(env, seed, policy):
    obs, info = env.reset(seed=seed)
    steps = [(obs.tolist(), None, False, False)]
    done = False
    while not done:
        action = policy(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((obs.tolist(), reward, terminated, truncated))
        done = terminated or truncated
    return steps, info


def has_decision(scenario, seed, decision="art"):
    """Whether the run of ``scenario`` with ``seed`` reaches a decision."""
    _, (obs, _, _, _) = _artq.SteeredRun.start(dict(scenario, seed=seed), decision)
    return obs is not None


class Environment(unittest.TestCase):
    def test_passes_the_gymnasium_checker(self):
        # The checker passes. Its only warnings are its notes on the
        # infinite bounds of RCP's and AutoRec's observation spaces, whose
        # states are unbounded (times, counts, R_Δ): one for RCP's upper
        # bound, one each for AutoRec's lower and upper bounds.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = RetransmissionEnv(scenario=TINY)
            check_env(env, skip_render_check=True)
            env = RetransmissionEnv(scenario=dict(TINY, workload=MESSAGES),
                                    decision="rcp")
            self.assertTrue(np.isposinf(env.observation_space.high).all())
            check_env(env, skip_render_check=True)
            env = RetransmissionEnv(scenario=LIVE, decision="autorec")
            self.assertEqual(env.observation_space.low[-1], -np.inf)
            self.assertEqual(env.observation_space.high[-1], 1.0)
            self.assertTrue(np.isposinf(env.observation_space.high[:-1]).all())
            check_env(env, skip_render_check=True)
        messages = [str(w.message) for w in caught]
        self.assertEqual(len(messages), 3, messages)
        self.assertEqual(sum("maximum value is infinity" in m for m in messages), 2, messages)
        self.assertEqual(sum("minimum value is -infinity" in m for m in messages), 1, messages)

    def test_reset_runs_the_seed_asked_for_or_raises(self):
        # 30 KB at 1% loss: some seeds lose nothing, so their runs have no
        # decision.
        sparse = {"workload": {"size": "30KB"}, "link": {"bw": 20, "rtt": 30, "loss": 0.01}}
        seeds = range(1, 40)
        with_decision = [s for s in seeds if has_decision(sparse, s)]
        without = [s for s in seeds if s not in with_decision]
        self.assertTrue(with_decision and without, (with_decision, without))
        env = RetransmissionEnv(scenario=sparse)
        for seed in with_decision[:3]:
            _, info = env.reset(seed=seed)
            self.assertEqual(info["seed"], seed)
        for seed in without[:3]:
            with self.assertRaises(artq.EnvError) as e:
                env.reset(seed=seed)
            self.assertIn(f"seed {seed}", str(e.exception))
        # No seed asked for: seeds are drawn until one has a decision.
        _, info = env.reset()
        self.assertIn(info["seed"], range(0, 2**31))
        self.assertTrue(has_decision(sparse, info["seed"]))
        lossless = RetransmissionEnv(scenario={"workload": {"size": "10KB"}, "link": {"loss": 0}})
        with self.assertRaises(artq.EnvError):
            lossless.reset(seed=1)
        with self.assertRaises(artq.EnvError) as e:
            lossless.reset()
        self.assertIn("seeds gave no art decision", str(e.exception))

    def test_a_run_that_fails_raises_from_step(self):
        # The time limit cuts the run after a few decisions: step raises
        # RunError (with the command line's message), not info["error"].
        cut = dict(TINY, workload={"size": "2MB"}, time_limit=0.5)
        env = RetransmissionEnv(scenario=cut)
        env.reset(seed=1)
        steps = 0
        with self.assertRaises(artq.RunError) as e:
            for _ in range(100_000):
                env.step(0)
                steps += 1
        self.assertGreater(steps, 0)
        self.assertIn("run incomplete", str(e.exception))
        self.assertIsInstance(e.exception, RuntimeError)

    def test_registered_under_its_id(self):
        env = gym.make("artq/Retransmission-v0", scenario=TINY)
        obs, _ = env.reset(seed=2)
        self.assertEqual(obs.shape, (7,))
        self.assertEqual(env.action_space.n, 8)
        env.close()

    def test_one_seed_one_trajectory(self):
        env = RetransmissionEnv(scenario=TINY, r_max=4)
        rng = np.random.default_rng(0)
        actions = rng.integers(0, 4, size=10_000)
        counter = iter(range(10_000))
        policy = lambda obs: int(actions[next(counter)])  # noqa: E731
        a, info_a = trajectory(env, 7, policy)
        counter = iter(range(10_000))
        b, info_b = trajectory(env, 7, policy)
        self.assertGreater(len(a), 5)
        self.assertEqual(a, b)
        self.assertEqual(info_a["result"]["fct_ms"], info_b["result"]["fct_ms"])
        c, _ = trajectory(env, 8, lambda obs: 0)
        self.assertNotEqual(a, c)

    def test_the_action_is_the_redundancy_level(self):
        env = RetransmissionEnv(scenario=TINY, r_max=4)
        _, one = trajectory(env, 3, lambda obs: 0)
        _, four = trajectory(env, 3, lambda obs: 3)
        # Level 1 everywhere: one replica per round, no extra copies;
        # level 4: three extra copies per round.
        self.assertEqual(one["result"]["extra_replicas"], 0)
        self.assertGreater(four["result"]["extra_replicas"], 2 * four["decisions"])
        # A.2's rewards: a round delivered at level 1 earns 1/N > 0.
        steps, _ = trajectory(env, 3, lambda obs: 0)
        self.assertGreater(sum(r for _, r, _, _ in steps[1:]), 0)

    def test_rcp_decisions_drop_or_retransmit(self):
        scenario = dict(TINY, workload=MESSAGES)
        env = RetransmissionEnv(scenario=scenario, decision="rcp")
        self.assertEqual(env.action_space.n, 2)
        _, drop = trajectory(env, 4, lambda obs: 0)
        _, keep = trajectory(env, 4, lambda obs: 1)
        self.assertLess(drop["result"]["delivery_ratio"], keep["result"]["delivery_ratio"])

    def test_autorec_decides_a_thres_once_per_interval(self):
        env = RetransmissionEnv(scenario=LIVE, decision="autorec")
        self.assertEqual(env.action_space.n, 5)
        self.assertEqual(env.observation_space.shape, (9,))
        cycle = lambda obs: int(obs[0] + 1) % 5  # noqa: E731 (next level)
        a, info_a = trajectory(env, 5, cycle)
        b, info_b = trajectory(env, 5, cycle)
        self.assertEqual(a, b)
        self.assertEqual(info_a["result"], info_b["result"])
        # One decision per 1 s interval of a 4 s stream.
        self.assertIn(len(a) - 1, (2, 3, 4))
        # The observation's first value is the A_thres the interval ran
        # with: the start level 1, then each action.
        levels = [obs[0] for obs, _, _, _ in a]
        self.assertEqual(levels[:3], [1.0, 2.0, 3.0])
        # Eq. 2's utility as the reward: negative, finite.
        rewards = [r for _, r, _, _ in a[1:-1]]
        self.assertTrue(all(r < 0 and np.isfinite(r) for r in rewards), rewards)
        # The action is the redundancy: 4 everywhere reinjects more than 0.
        _, none = trajectory(env, 5, lambda obs: 0)
        _, most = trajectory(env, 5, lambda obs: 4)
        self.assertGreater(most["result"]["extra_replicas"], none["result"]["extra_replicas"])
        gain = RetransmissionEnv(scenario=LIVE, decision="autorec", reward="autorec-gain")
        steps, _ = trajectory(gain, 5, cycle)
        self.assertTrue(all(r <= 1.0 for _, r, _, _ in steps[1:]))

    def test_bad_arguments(self):
        with self.assertRaises(artq.EnvError):
            RetransmissionEnv(decision="teleport")
        with self.assertRaises(artq.EnvError):
            RetransmissionEnv(reward="rcp")
        with self.assertRaises(artq.ScenarioError):
            RetransmissionEnv(scenario={"bogus": 1})
        with self.assertRaises(artq.ScenarioFileNotFound):
            RetransmissionEnv(scenario={"link": {"trace": "/nonexistent/t.down"}})
        for bad in ({"scenario": [1]}, {"decision": 1}, {"reward": 2}, {"r_max": 0},
                    {"r_max": "many"}, {"r_max": 2**40}, {"r_max": 2.5}):
            with self.assertRaises(artq.EnvError, msg=repr(bad)):
                RetransmissionEnv(**bad)
        env = RetransmissionEnv(scenario=TINY, r_max=2)
        with self.assertRaises(artq.RunError):
            env.step(0)  # before reset()
        for seed in (-1, "x", 1.5, True):
            with self.assertRaises(artq.EnvError, msg=repr(seed)):
                env.reset(seed=seed)
        with self.assertRaises(artq.ScenarioError):
            env.reset(seed=1, options={"scenario": {"bogus": 1}})
        for options in ([1], {"scenario": 5}):
            with self.assertRaises(artq.EnvError, msg=repr(options)):
                env.reset(seed=1, options=options)
        env.reset(seed=1)
        for action in (5, 2, -1, "a", 1.5, None, 2**70):
            with self.assertRaises(artq.EnvError, msg=repr(action)):
                env.step(action)
        env.step(np.int64(1))  # numpy's integers are actions too
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(0)
            done = terminated or truncated
        with self.assertRaises(artq.RunError):
            env.step(0)  # after the episode ended
        self.assertEqual([n for n, _ in artq.rewards()],
                         ["art-dqn", "art-mab", "rcp", "autorec", "autorec-gain"])
        self.assertEqual([n for n, _ in artq.decisions()], ["art", "rcp", "autorec"])
        with self.assertRaises(artq.ScenarioError) as e:
            RetransmissionEnv(scenario=TINY, decision="autorec")
        self.assertIn("live workload", str(e.exception))
        with self.assertRaises(artq.EnvError):
            RetransmissionEnv(scenario=LIVE, decision="autorec", reward="rcp")


class TrainingExample(unittest.TestCase):
    def test_bandit_training_loop_runs_at_tiny_size(self):
        import train_bandit

        rewards = train_bandit.main(episodes=3, scenario=TINY, r_max=4, quiet=True)
        self.assertEqual(len(rewards), 3)
        self.assertTrue(all(np.isfinite(r) for r in rewards))


if __name__ == "__main__":
    unittest.main()
