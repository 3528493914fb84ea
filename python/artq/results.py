"""The shapes of the dicts artq returns, as ``TypedDict``s for type checkers
and editors.

``SimResult`` is the object ``artq sim --json`` prints and ``artq.sim``
returns (``lab::RunMetrics``; the fields are described in docs/sim.md);
``RunCase`` is a run of ``_artq.run_case`` (what ``artq.sweep`` gathers,
``frame.attrs["runs"]``); ``ExperimentCases`` what
``_artq.experiment_cases`` returns; ``Grid`` the grid ``artq.sweep``
takes. tests/python/test_artq.py checks the real dicts against these
declarations key by key, so they cannot drift apart.

A key of ``SimResult`` that only some workloads report (the live, DASH,
RPC and messages metrics, per-file summaries, ECN marks) is declared
not required: it is absent, not None, when the run does not report it.
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence, TypedDict, Union

__all__ = ["Summary", "SimResult", "RunCase", "Case", "ExperimentCases", "Grid"]


class Summary(TypedDict):
    """A distribution of durations in ms: nearest-rank percentiles, the
    largest value and the mean."""

    p50: float
    p95: float
    p99: float
    max: float
    mean: float


class _SimResultEvery(TypedDict):
    """The fields of every run."""

    scheme: str
    seed: int
    cc: str
    files: int
    fct_ms: float
    goodput_mbps: float
    bytes: int
    data_packets: int
    lost_packets: int
    replicas: int
    extra_replicas: int
    n_max: int
    k_max: int
    n_hist: List[int]
    t_wait_ms: Optional[Summary]
    recovery_latency_ms: Optional[Summary]
    recovery_deterioration_rate: float
    share_n_ge_2: float
    retransmission_ratio: float
    spurious_retransmissions: int


class SimResult(_SimResultEvery, total=False):
    """One run's metrics: the object ``artq sim --json`` prints (fields in
    docs/sim.md). The keys of ``_SimResultEvery`` are always present; those
    declared here only when the run reports them."""

    fct_ms_per_file: Summary
    n_max_file_mean: float
    recovery_latency_multi_ms: Summary
    avg_bitrate_kbps: float
    startup_ms: float
    freeze_count: float
    freeze_ms: float
    rebuffer_count: int
    rebuffer_ms: float
    bitrate_switches: int
    rpc_fct_ms: Summary
    delivery_ratio: float
    mean_latency_ms: float
    utility: float
    retransmission_probability: float
    retransmission_probability_ewma: float
    retransmission_probability_tenths: float
    loss_final: float
    mean_latency_final_ms: float
    utility_final: float
    ecn_ce_reported: int


class RunCase(TypedDict):
    """One run as a case of an experiment (``_artq.run_case``): its
    ``group``, ``scheme`` label and ``seed``; ``error`` (None when it
    completed); ``metrics``, the row of ``NAME_runs.csv`` by metric (empty
    on failure); ``sim``, the ``artq sim --json`` dict (None on failure)."""

    group: str
    scheme: str
    seed: int
    error: Optional[str]
    metrics: Dict[str, float]
    sim: Optional[SimResult]


class Case(TypedDict):
    """A case of an experiment: its ``group``, its ``scheme`` label, and
    its ``scenario`` keys (as ``artq.sim`` takes them)."""

    group: str
    scheme: str
    scenario: Dict[str, Any]


class ExperimentCases(TypedDict):
    """The runs of an experiment (``_artq.experiment_cases``): every case
    runs with every seed."""

    name: str
    seeds: List[int]
    cases: List[Case]


class Grid(TypedDict, total=False):
    """A grid of ``artq.sweep``: ``scenarios`` (group name -> scenario
    keys, or a list of scenario dicts, each labelled by its keys),
    ``schemes`` (scheme names; default: each scenario's own) and ``base``
    (scenario keys every scenario starts from)."""

    scenarios: Union[Mapping[str, Mapping[str, Any]], Sequence[Mapping[str, Any]]]
    schemes: Union[str, Sequence[str]]
    base: Mapping[str, Any]
