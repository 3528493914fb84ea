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
scenario with seed ``s``, or raises ``EnvError`` when that seed's run has no
decision: the same seed and the same actions give the same episode, step
for step. ``info["result"]`` holds the run's ``artq sim --json`` metrics at
the end of an episode; a run that fails (its time limit, an idle timeout)
raises ``RunError`` from ``step``.

Needs gymnasium and numpy: ``pip install 'artq[env]'``.
"""

from typing import Any, Dict, Mapping, Optional, Tuple

from . import _artq
from ._artq import EnvError, MissingExtraError, RunError

try:
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces
except ImportError as e:
    raise MissingExtraError(
        f"artq.env needs gymnasium and numpy ({e}): pip install 'artq[env]'"
    ) from e

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


# Seeds reset() tries when it picks them itself (no seed given) before it
# gives up on a scenario whose runs have no decision.
SEED_TRIES = 100


def _observation_bounds(decision: str, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """The observation space's bounds: ART-DQN's state lies in [0, 1];
    RCP's is non-negative (counts, seconds, a rate) and unbounded above;
    AutoRec's too but for R_Δ (its last value), which is at most 1 and
    unbounded below."""
    base = decision.split(":")[0]
    if base == "art":
        return np.zeros(n, np.float32), np.ones(n, np.float32)
    low = np.zeros(n, np.float32)
    high = np.full(n, np.inf, np.float32)
    if base == "autorec":
        low[-1] = -np.inf
        high[-1] = 1.0
    return low, high


def _int(value: Any, what: str) -> int:
    """``value`` as an int (an integer, or a numpy integer, or a float with
    no fraction, as agents give actions); ``EnvError`` otherwise."""
    if isinstance(value, bool):
        raise EnvError(f"{what} is an integer, not {value!r}")
    try:
        as_int = int(value)
        exact = as_int == value
    except (TypeError, ValueError, OverflowError):
        raise EnvError(f"{what} is an integer, not {value!r}") from None
    if not exact:
        raise EnvError(f"{what} is an integer, not {value!r}")
    return as_int


class RetransmissionEnv(gym.Env):
    """Retransmission decisions of the real transport, one per step.

    Parameters
    ----------
    scenario : dict, optional
        Scenario keys as for ``artq.sim``; its ``scheme`` is replaced.
        Default: 1 MB over 100 Mbit/s, 30 ms, 2% loss; for
        ``decision="autorec"``, a 20 s live stream in AutoRec's default
        setting.
    decision : str, default "art"
        What the agent decides: ``"art"``, ``"rcp"`` (or
        ``"rcp:OPTIONS"``) or ``"autorec"`` (see ``artq.decisions()``).
    reward : str, optional
        A reward preset (``artq.rewards()``); default the decision's
        paper's.
    r_max : int, default 8
        The highest ART level (the ``art`` decision's action count).

    Raises
    ------
    EnvError
        An unknown decision or reward, a reward that does not fit the
        decision, a bad ``r_max``, an ``autorec`` decision without a live
        workload.
    ScenarioError, ScenarioFileNotFound
        A scenario that cannot run, as ``artq.sim`` raises them.

    Notes
    -----
    The first scenario check starts a run, so a bad scenario fails here,
    not at ``reset``.
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
        if not isinstance(scenario, Mapping):
            raise EnvError(f"scenario is a dict of scenario keys, not {type(scenario).__name__}")
        if not isinstance(decision, str):
            raise EnvError(f"decision is a name (artq.decisions()), not {decision!r}")
        if reward is not None and not isinstance(reward, str):
            raise EnvError(f"reward is a preset name (artq.rewards()), not {reward!r}")
        self._scenario = dict(scenario)
        self._decision = decision
        self._reward = reward
        self._r_max = _int(r_max, "r_max")
        if not 1 <= self._r_max <= 2**32 - 1:
            raise EnvError(f"r_max {self._r_max} must be between 1 and {2**32 - 1}")
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
        """Start an episode.

        Parameters
        ----------
        seed : int, optional
            The scenario's seed (links, endpoints, contents): the same seed
            gives the same episode for the same actions. None: seeds drawn
            from ``self.np_random`` until one's run has a decision (at most
            ``SEED_TRIES``).
        options : dict, optional
            ``{"scenario": {...}}``: scenario keys that override the
            environment's for this episode.

        Returns
        -------
        observation : numpy.ndarray
            The first decision's observation.
        info : dict
            ``seed``: the seed the episode runs.

        Raises
        ------
        EnvError
            ``seed`` is not a non-negative integer, ``options`` is not a
            dict of dicts, or the seed's run has no decision at all (no
            loss to recover); without ``seed``, none of ``SEED_TRIES``
            drawn seeds had one.
        ScenarioError, ScenarioFileNotFound
            The overriding scenario keys cannot run.
        """
        if seed is not None:
            seed = _int(seed, "seed")
            if seed < 0:
                raise EnvError(f"seed {seed} must be non-negative")
        super().reset(seed=seed)
        scenario = dict(self._scenario)
        if options is not None and not isinstance(options, Mapping):
            raise EnvError(f"options is a dict, not {options!r}")
        if options and "scenario" in options:
            if not isinstance(options["scenario"], Mapping):
                raise EnvError(
                    f"options['scenario'] is a dict of scenario keys, not {options['scenario']!r}"
                )
            scenario.update(options["scenario"])
        # An episode with no decision at all (no loss) is not an episode:
        # a seed asked for runs or raises; seeds drawn here are redrawn.
        tries = 1 if seed is not None else SEED_TRIES
        for _ in range(tries):
            run_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
            run, (obs, _reward, _terminated, _truncated) = _artq.SteeredRun.start(
                dict(scenario, seed=run_seed),
                self._decision,
                self._reward,
                self._r_max,
            )
            if obs is not None:
                break
        else:
            if seed is not None:
                raise EnvError(
                    f"seed {seed}: the run ends without a {self._decision} decision "
                    "(nothing was lost): choose another seed or a lossier scenario"
                )
            raise EnvError(
                f"{SEED_TRIES} seeds gave no {self._decision} decision (nothing was lost): "
                "is there any loss in the scenario?"
            )
        self._run = run
        return self._observation(obs), {"seed": run_seed}

    def step(self, action) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        """Answer the waiting decision with ``action`` and run to the next.

        Parameters
        ----------
        action : int
            An action of ``self.action_space`` (see the module's
            documentation for each decision's meaning).

        Returns
        -------
        observation : numpy.ndarray
            The next decision's observation (the last one again when the
            episode ended).
        reward : float
            The rewards of the outcomes that became known since the
            previous decision.
        terminated, truncated : bool
            The run completed; the run was cut. A cut run (its time limit
            reached, a stall) has no result, so ``step`` raises
            ``RunError`` for it instead of returning ``truncated``.
        info : dict
            ``decisions`` answered so far; at the end of an episode
            ``result``, the run's ``artq sim --json`` dict.

        Raises
        ------
        EnvError
            An action that is not an integer of the action space.
        RunError
            ``step`` before ``reset`` or after the episode ended, or a run
            that failed (its time limit reached, the connection given up):
            the message is the command line's.
        """
        if self._run is None:
            raise RunError("call reset() before step()")
        action = _int(action, "action")
        if not 0 <= action < self.action_space.n:
            raise EnvError(f"action {action} is out of range: 0..{self.action_space.n}")
        obs, reward, terminated, truncated = self._run.act(action)
        info: Dict[str, Any] = {"decisions": self._run.decisions}
        if terminated or truncated:
            info["result"] = self._run.result()
        return self._observation(obs), float(reward), bool(terminated), bool(truncated), info
