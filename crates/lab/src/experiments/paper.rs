//! The paper's own numbers as data: every value the papers give for one of
//! our metrics, scheme and setting, so the charts can draw them beside ours.
//!
//! Why a table of its own: each experiment's `paper_numbers` are sentences
//! (they carry context a number cannot), and most of the papers' figures
//! give no numbers at all. The values here are exactly those of the
//! sentences that map onto one of our metrics for one scheme, transcribed
//! with the sentence's source; a test checks that each value also appears in
//! its experiment's `paper_numbers`, so the two cannot drift apart.
//!
//! Relative claims ("12%-40% less than OR3") are left out: they have no
//! absolute value to draw. The report still quotes them.

/// One number the paper gives for a metric of ours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperValue {
    /// The experiment it belongs to (`art-fig25`).
    pub experiment: &'static str,
    /// The group (setting) it was measured in; `None` when the paper gives
    /// one number for all of the experiment's settings.
    pub group: Option<&'static str>,
    /// Our name of the scheme.
    pub scheme: &'static str,
    /// Our metric.
    pub metric: &'static str,
    /// The value, in our metric's unit.
    pub value: f64,
    /// How the value is written in the experiment's `paper_numbers`
    /// (checked by a test).
    pub written: &'static str,
}

/// Shorthand for the table below.
const fn v(
    experiment: &'static str,
    group: Option<&'static str>,
    scheme: &'static str,
    metric: &'static str,
    value: f64,
    written: &'static str,
) -> PaperValue {
    PaperValue {
        experiment,
        group,
        scheme,
        metric,
        value,
        written,
    }
}

/// Every paper value, grouped by experiment.
pub const PAPER_VALUES: &[PaperValue] = &[
    // ART journal §7.5, Fig. 25 (DASH over the Verizon trace): one setting,
    // whose video is shorter at the smaller scales.
    v(
        "art-fig25",
        None,
        "quic",
        "avg_bitrate_kbps",
        254.0,
        "254 kbit/s (QUIC)",
    ),
    v(
        "art-fig25",
        None,
        "art",
        "avg_bitrate_kbps",
        274.0,
        "274 kbit/s (ART)",
    ),
    v(
        "art-fig25",
        None,
        "quic",
        "rebuffer_count",
        82.0,
        "82 (QUIC)",
    ),
    v("art-fig25", None, "art", "rebuffer_count", 73.0, "73 (ART)"),
    v(
        "art-fig25",
        None,
        "quic",
        "rebuffer_s",
        322.0,
        "322 s (QUIC)",
    ),
    v("art-fig25", None, "art", "rebuffer_s", 251.0, "251 s (ART)"),
    // ART journal §7.3, Fig. 23: pooled over the settings.
    v("art-fig23", None, "quic-art", "dn_max", 5.0, "up to 5"),
    v("art-fig23", None, "quic-art", "dtwait_p50_ms", 3.23, "3.23"),
    v(
        "art-fig23",
        None,
        "quic-art",
        "dtwait_p95_ms",
        32.83,
        "32.83",
    ),
    v(
        "art-fig23",
        None,
        "quic-art",
        "dtwait_p99_ms",
        78.48,
        "78.48 ms",
    ),
    // ART journal Appendix B (Fig. 27's schemes): one number per scheme.
    v("art-fig27", None, "art", "t_wait_p50_ms", 65.0, "ART 65 ms"),
    v(
        "art-fig27",
        None,
        "art-mab-eg",
        "t_wait_p50_ms",
        77.0,
        "MAB-EG 77 ms",
    ),
    v(
        "art-fig27",
        None,
        "art-mab-ucb",
        "t_wait_p50_ms",
        63.0,
        "MAB-UCB 63 ms",
    ),
    v("art-fig27", None, "art", "t_wait_p99_ms", 549.0, "p99 549"),
    v(
        "art-fig27",
        None,
        "art-mab-eg",
        "t_wait_p99_ms",
        633.0,
        "633",
    ),
    v(
        "art-fig27",
        None,
        "art-mab-ucb",
        "t_wait_p99_ms",
        600.0,
        "600 ms",
    ),
    // RCP Table II on the authors' channel (latency in slots = ms here).
    v(
        "rcp-table2",
        Some("authors"),
        "udp",
        "loss",
        0.405,
        "UDP epsilon 0.405",
    ),
    v(
        "rcp-table2",
        Some("authors"),
        "arq",
        "loss",
        0.034,
        "ARQ epsilon 0.034",
    ),
    v(
        "rcp-table2",
        Some("authors"),
        "tcp",
        "loss",
        0.99968,
        "TCP NewReno epsilon 0.99968",
    ),
    v(
        "rcp-table2",
        Some("authors"),
        "udp",
        "mean_latency_ms",
        101.07,
        "l 101.070",
    ),
    v(
        "rcp-table2",
        Some("authors"),
        "arq",
        "mean_latency_ms",
        611.0,
        "l 611.000",
    ),
    v(
        "rcp-table2",
        Some("authors"),
        "tcp",
        "mean_latency_ms",
        2414.607,
        "l 2414.607",
    ),
    // RCP Experiment 4, Table VI (beta 0.7).
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "udp",
        "loss",
        0.443,
        "UDP epsilon 0.443",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "udp",
        "mean_latency_ms",
        273.11,
        "l 273.110",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "udp",
        "utility",
        -0.531,
        "U -0.531",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "arq",
        "loss",
        0.151,
        "ARQ epsilon 0.151",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "arq",
        "mean_latency_ms",
        1551.363,
        "l 1551.363",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "arq",
        "utility",
        -0.267,
        "U -0.267",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "rcp",
        "loss",
        0.288,
        "RCP epsilon 0.288",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "rcp",
        "mean_latency_ms",
        577.592,
        "l 577.592",
    ),
    v(
        "rcp-exp4",
        Some("beta0.7"),
        "rcp",
        "utility",
        -0.2,
        "U -0.200",
    ),
    // AutoRec §5.1, Fig. 11: deterioration rate with AutoRec per loss rate
    // (the default setting's loss is 5%), and the 100 ms RTT setting.
    v(
        "autorec-fig11",
        Some("loss=3%"),
        "autorec",
        "recovery_deterioration_rate",
        0.008,
        "0.8/",
    ),
    v(
        "autorec-fig11",
        Some("default"),
        "autorec",
        "recovery_deterioration_rate",
        0.016,
        "/1.6/",
    ),
    v(
        "autorec-fig11",
        Some("loss=10%"),
        "autorec",
        "recovery_deterioration_rate",
        0.035,
        "/3.5/",
    ),
    v(
        "autorec-fig11",
        Some("loss=15%"),
        "autorec",
        "recovery_deterioration_rate",
        0.057,
        "/5.7%",
    ),
    v(
        "autorec-fig11",
        Some("rtt=100ms"),
        "quic",
        "recovery_latency_multi_mean_ms",
        134.9,
        "134.9",
    ),
    v(
        "autorec-fig11",
        Some("rtt=100ms"),
        "autorec",
        "recovery_latency_multi_mean_ms",
        88.0,
        "88.0 ms",
    ),
    // AutoRec §5.1, Fig. 13.
    v(
        "autorec-fig13",
        Some("theta=50ms"),
        "autorec",
        "recovery_latency_multi_mean_ms",
        43.4,
        "43.4 ms",
    ),
    v(
        "autorec-fig13",
        Some("theta=50ms"),
        "autorec",
        "recovery_deterioration_rate",
        0.016,
        "1.6%",
    ),
    v(
        "autorec-fig13",
        Some("alpha=0.01"),
        "autorec:alpha=0.01",
        "recovery_deterioration_rate",
        0.0151,
        "1.51%",
    ),
    v(
        "autorec-fig13",
        Some("alpha=0.01"),
        "autorec:alpha=0.01",
        "recovery_latency_multi_mean_ms",
        44.3,
        "44.3 ms",
    ),
    v(
        "autorec-fig13",
        Some("alpha=1"),
        "autorec:alpha=1",
        "recovery_deterioration_rate",
        0.0232,
        "2.32%",
    ),
    v(
        "autorec-fig13",
        Some("alpha=1"),
        "autorec:alpha=1",
        "recovery_latency_multi_mean_ms",
        53.8,
        "53.8 ms",
    ),
];

/// The paper's values of `experiment`.
pub fn paper_values(experiment: &str) -> impl Iterator<Item = &'static PaperValue> + '_ {
    PAPER_VALUES
        .iter()
        .filter(move |p| p.experiment == experiment)
}

/// The paper's value of `metric` for `scheme` in `group`, if it gives one.
pub fn paper_value(experiment: &str, group: &str, scheme: &str, metric: &str) -> Option<f64> {
    paper_values(experiment)
        .find(|p| p.scheme == scheme && p.metric == metric && p.group.is_none_or(|g| g == group))
        .map(|p| p.value)
}
