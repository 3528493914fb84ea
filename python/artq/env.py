"""The Gymnasium environment of artq: retransmission decisions on the real
transport in the simulator.

``RetransmissionEnv`` (registered as ``artq/Retransmission-v0``) runs one
simulated transfer per episode (a scenario of ``artq.sim``) with the
sender's loss recovery paused at every decision of one kind:

- ``decision="art"``: a retransmission round's redundancy level, where
  ART-DQN decides (ART journal, Appendix A.2). Observation: ART-DQN's
  7-value state (packet and replica loss rates, the queueing share of
  the RTT 1 - min_rtt/srtt, the RTT variation rttvar/srtt, the recent
  largest loss burst over 16, the last level over R_max, the round over
  8; each in [0, 1]). Action ``a``: send the round
  with ``a + 1`` replicas (``Discrete(r_max)``). The replicas are then
  spread by ART's Replica Scheduler and sent opportunistically, as ART
  does.
- ``decision="rcp"``: a timed-out message's retransmit (1) or drop (0),
  where RCP decides (rcp.md §III); the scenario needs a ``messages``
  workload. Observation: RCP's eq. 2 state ``[attempts, queued s, srtt s,
  link loss, latency s]``.
- ``decision="autorec"``: AutoRec's A_thres for the next decision
  interval (1 s, or 10 SRTT when longer), where its Redundancy Adapter
  decides (autorec.md §4.1); the scenario needs a ``live`` workload.
  Observation: the state the adapter decides from, ``[A_thres the interval
  ran with, recovery latency s, n (max round), loss rate, srtt s, min_rtt
  s, goodput Mbit/s, E_waiting s (eq. 4), R_Δ (eq. 3)]``. Action ``a``:
  A_thres = ``a`` (``Discrete(5)``, the paper's 0..4); the reinjection
  itself (off-mode and opportunistic) is AutoRec's.

Rewards are the papers' (``reward=`` preset, see ``artq.rewards()``):
``art-dqn`` (A.2: ``1/(N·R)`` when round N sent at level R gets through,
``-1.05/(N·R)`` when all its replicas are lost), ``art-mab`` (A.1, penalty
1.01), ``rcp`` (eqs. 4-5), ``autorec`` (eq. 2: minus the interval's
utility, goodput in Mbit/s), ``autorec-gain`` (eq. 3: R_Δ). A step's reward
is the sum of the rewards of the outcomes that became known since the
previous decision (for ``autorec``, the interval the action chose).

The simulator runs until the next decision and returns control at that
virtual instant; the action is applied before time moves on (see
docs/python.md, "How the environment pauses"). ``reset(seed=s)`` runs the
scenario with seed ``s``: the same seed and the same actions give the same
episode, step for step. ``info["result"]`` holds the run's ``artq sim
--json`` metrics at the end of an episode.
"""

from typing import Any, Dict, Mapping, Optional, Tuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from . import _artq

__all__ = ["RetransmissionEnv"]

# Small by default: one episode is a few hundred decisions at 2% loss.
DEFAULT_SCENARIO: Dict[str, Any] = {
    "workload": {"size": "1MB"},
    "link": {"bw": 100, "rtt": 30, "loss": 0.02},
}

# The autorec decision's default: AutoRec's testbed setting (autorec.md
# §5.1: ~8 Mbit/s live stream, 5% loss, 50 ms, 8 Mbit/s, 500 KB buffer,
# BBR as in artq reproduce's AutoRec experiments), a 20 s stream: about
# 20 decisions.
DEFAULT_LIVE_SCENARIO: Dict[str, Any] = {
    "cc": "bbr",
    "workload": {"kind": "live", "bitrate": 7000, "duration": 20},
    "link": {"bw": 8, "rtt": 50, "loss": 0.05, "queue_bytes": 500000},
}


def _observation_bounds(decision: str, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """The observation space's bounds: ART-DQN's state lies in [0, 1];
    RCP's is non-negative (counts, seconds, a rate), bounded far above any
    value a run gives; AutoRec's too but for R_Δ (its last value), which is
    at most 1 and unbounded below."""
    base = decision.split(":")[0]
    if base == "art":
        return np.zeros(n, np.float32), np.ones(n, np.float32)
    low = np.zeros(n, np.float32)
    high = np.full(n, 1e9, np.float32)
    if base == "autorec":
        low[-1] = -1e9
        high[-1] = 1.0
    return low, high


class RetransmissionEnv(gym.Env):
    """Retransmission decisions of the real transport, one per step.

    Parameters: ``scenario`` (dict of scenario keys as for ``artq.sim``;
    its ``scheme`` is replaced; default: 1 MB over 100 Mbit/s, 30 ms,
    2% loss, or for ``autorec`` a 20 s live stream in AutoRec's default
    setting), ``decision`` (``"art"``, ``"rcp[:OPTIONS]"`` or
    ``"autorec"``), ``reward``
    (a preset name; default the decision's paper's), ``r_max`` (highest
    ART level, default 8).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        scenario: Optional[Mapping[str, Any]] = None,
        decision: str = "art",
        reward: Optional[str] = None,
        r_max: int = 8,
    ):
        super().__init__()
        if scenario is None:
            scenario = DEFAULT_LIVE_SCENARIO if decision == "autorec" else DEFAULT_SCENARIO
        self._scenario = dict(scenario)
        self._decision = decision
        self._reward = reward
        self._r_max = int(r_max)
        # Check everything now (a bad scenario raises here, not at reset).
        run, _ = _artq.SteeredRun.start(
            dict(self._scenario, seed=self._scenario.get("seed", 1)),
            decision,
            reward,
            self._r_max,
        )
        self.action_space = spaces.Discrete(run.actions)
        low, high = _observation_bounds(decision, run.observation_len)
        self.observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self._run = None
        self._obs = np.zeros(run.observation_len, dtype=np.float32)

    def _observation(self, obs) -> np.ndarray:
        if obs is None:
            # The episode ended: the last observation stands.
            return self._obs
        self._obs = np.asarray(obs, dtype=np.float32)
        return self._obs

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Start an episode. ``seed`` is the scenario's seed (links,
        endpoints, contents): the same seed gives the same episode for the
        same actions. Without one, the next seed of ``self.np_random``."""
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
        scenario = dict(self._scenario, seed=int(seed))
        if options and "scenario" in options:
            scenario.update(options["scenario"])
        # An episode with no decision at all (no loss) is not an episode:
        # try the following seeds.
        for attempt in range(100):
            run, (obs, _reward, terminated, truncated) = _artq.SteeredRun.start(
                dict(scenario, seed=int(seed) + attempt),
                self._decision,
                self._reward,
                self._r_max,
            )
            if obs is not None:
                break
        else:
            raise ValueError(f"100 seeds from {seed} gave no decision: is there any loss?")
        self._run = run
        return self._observation(obs), {"seed": int(seed) + attempt}

    def step(self, action) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        if self._run is None:
            raise RuntimeError("call reset() before step()")
        obs, reward, terminated, truncated = self._run.act(int(action))
        info: Dict[str, Any] = {"decisions": self._run.decisions}
        if terminated or truncated:
            try:
                info["result"] = self._run.result()
            except ValueError as e:
                info["error"] = str(e)
        return self._observation(obs), float(reward), bool(terminated), bool(truncated), info
