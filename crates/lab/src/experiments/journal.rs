//! The ART journal's own evaluation experiments (§6.2 and §7, Figs. 16-24):
//! Figs. 19-22 (ART against the QUIC variants, OR3 and block FEC), Fig.
//! 24(b) (goodput against the receive window) and the Replica Scheduler's
//! ablation (Figs. 16-18), with the paper's claims about them. The registry
//! is in [`super`]; the types and helpers every experiment shares are in
//! [`super::common`], the shared scenario builders in [`super::scenarios`].
//!
//! Settings follow the paper's text; where it leaves a value open (file size
//! of Fig. 22, the congestion controller, the loss direction) the choice is
//! stated in the experiment's `setting`. Losses apply to both directions
//! (`artq sim`'s default), and each run may take up to 10^6 virtual seconds.

use transport::congestion::CongestionAlgorithm;

use super::common::{
    combine, find, groups, mean_of, num, reduction_pct, size_label, AggRow, Aside, Claim,
    Experiment, Scale, Verdict,
};
use super::scenarios::{base, cases};
use crate::scenario::Scenario;
use apps::workload::Workload;
use netem::{BurstReset, LossKind};

const FIG19_SCHEMES: &[&str] = &["quic", "2n+1", "or3", "art"];

pub(super) fn fig19(scale: Scale) -> Experiment {
    let size = scale.pick(100_000_000, 10_000_000, 1_000_000);
    let group = format!("size={}", size_label(size));
    Experiment {
        name: "fig19",
        title: "Fig. 19: ART against QUIC variants and OR3 (n_max and redundancy cost)",
        setting: format!(
            "one {} file, 100 Mbit/s, 30 ms RTT, 4% Bernoulli loss both ways, Cubic; \
             schemes quic (the paper's QUIC R=1), 2n+1 (QUIC R=2n+1), or3, art",
            size_label(size)
        ),
        paper_numbers: &[
            "§7.2, Fig. 19: bar chart only, no numbers in the text.",
            "§7.2: ART \"boasts the smallest N_max, outperforming all the other QUIC variants\".",
            "§7.2: ART has \"less redundancy cost when juxtaposed with its counterparts\" \
             (issue 4 reads this as: below OR3's and R=2n+1's).",
        ],
        table_metrics: &[
            "n_max",
            "redundancy",
            "redundancy_ratio",
            "fct_ms",
            "share_n_ge_2",
        ],
        cases: cases(&group, FIG19_SCHEMES, |s| {
            base(s, 100.0, 30.0, 0.04, Workload::bulk(size))
        }),
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "§7.2, Fig. 19",
                paper: "ART has the smallest N_max of all schemes",
                judge: fig19_nmax,
            },
            Claim {
                source: "§7.2, Fig. 19",
                paper: "ART's redundancy cost is lower than OR3's and R=2n+1's",
                judge: fig19_cost,
            },
        ],
        asides: vec![],
    }
}

fn fig19_nmax(rows: &[AggRow]) -> (Verdict, String) {
    let Some(g) = groups(rows).into_iter().next() else {
        return (Verdict::Undecided, "no runs".into());
    };
    let get = |s: &str| mean_of(rows, &g, s, "n_max");
    let Some(art) = get("art") else {
        return (Verdict::Undecided, "art has no completed run".into());
    };
    let others: Vec<(&str, Option<f64>)> = FIG19_SCHEMES
        .iter()
        .filter(|s| **s != "art")
        .map(|s| (*s, get(s)))
        .collect();
    let text = format!(
        "mean n_max: art {}, {}",
        num(art),
        others
            .iter()
            .map(|(s, v)| format!("{s} {}", v.map_or("-".into(), num)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let vals: Vec<f64> = others.iter().filter_map(|(_, v)| *v).collect();
    let verdict = if vals.iter().all(|v| art < *v) {
        Verdict::Reproduced
    } else if vals.iter().all(|v| art <= *v) {
        // Tied for the smallest: "no higher than any other" (issue 4).
        Verdict::Partially
    } else if get("quic").is_some_and(|q| art < q) {
        Verdict::Partially
    } else {
        Verdict::NotReproduced
    };
    (verdict, text)
}

fn fig19_cost(rows: &[AggRow]) -> (Verdict, String) {
    let Some(g) = groups(rows).into_iter().next() else {
        return (Verdict::Undecided, "no runs".into());
    };
    let get = |s: &str| mean_of(rows, &g, s, "redundancy");
    let (Some(art), Some(or3), Some(odd)) = (get("art"), get("or3"), get("2n+1")) else {
        return (Verdict::Undecided, "a scheme has no completed run".into());
    };
    let text = format!(
        "mean redundancy (packets): art {}, or3 {}, 2n+1 {}, quic {}",
        num(art),
        num(or3),
        num(odd),
        get("quic").map_or("-".into(), num)
    );
    (
        combine(&[Some((art < or3 && art < odd, art < or3 || art < odd))]),
        text,
    )
}

// ---- Figs. 20-21 ------------------------------------------------------

/// Figs. 20-21 compare ART with OR3; 2n+1 (OR3 with the original
/// transmission counted as round 1) and art-or3start (ART's levels starting
/// where the authors' artifact starts them) show how sensitive the
/// comparison is to those two readings.
const FIG20_21_SCHEMES: &[&str] = &["quic", "or3", "2n+1", "art", "art-or3start"];

/// The columns of Figs. 20-21's tables.
const FIG20_21_TABLE: &[&str] = &[
    "redundancy",
    "extra_replicas",
    "n_max",
    "n_max_file_mean",
    "fct_ms",
];

pub(super) fn fig20_21(scale: Scale, high_loss: bool) -> Experiment {
    let files = scale.pick(1000, 100, 4);
    let loss = if high_loss { 0.10 } else { 0.01 };
    let mut all = Vec::new();
    for size in [1_000_000u64, 200_000] {
        let group = format!("size={} files={files}", size_label(size));
        all.extend(cases(&group, FIG20_21_SCHEMES, |s| {
            base(s, 100.0, 30.0, loss, Workload::files(files, size))
        }));
    }
    let setting = format!(
        "{files} files of 1MB and of 200KB over one connection, 100 Mbit/s, 30 ms RTT \
         (the paper gives no RTT for these figures; 30 ms as in Fig. 19), {}% Bernoulli \
         loss both ways, Cubic; schemes quic, or3, art",
        if high_loss { 10 } else { 1 }
    );
    if high_loss {
        Experiment {
            name: "fig21",
            title: "Fig. 21: ART against OR3 at 10% loss (1000 files of 1MB and of 200KB)",
            setting,
            paper_numbers: &[
                "§7.2, Fig. 21: at p = 10% ART reduces the redundancy cost by 12%-40% against OR3.",
                "§7.4, Fig. 21: at p = 10% ART's N_max is 7%-26% lower than OR3's for 200KB files \
                 and 9%-13% lower for 1MB files.",
            ],
            table_metrics: FIG20_21_TABLE,
            cases: all,
            seeds: scale.seeds(),
            claims: vec![
                Claim {
                    source: "§7.2, Fig. 21",
                    paper: "ART's redundancy cost is 12-40% lower than OR3's at 10% loss",
                    judge: fig21_cost,
                },
                Claim {
                    source: "§7.4, Fig. 21",
                    paper: "ART's N_max is lower than OR3's (7-26% for 200KB, 9-13% for 1MB)",
                    judge: nmax_vs_or3,
                },
            ],
            asides: fig20_21_asides(),
        }
    } else {
        Experiment {
            name: "fig20",
            title: "Fig. 20: ART against OR3 at 1% loss (1000 files of 1MB and of 200KB)",
            setting,
            paper_numbers: &[
                "§7.2, Fig. 20: at p = 1% ART reduces the redundancy cost by 75%-90% against OR3.",
                "§7.4, Fig. 20: at p = 1% ART's N_max is 3%-16% lower than OR3's for 200KB files \
                 and 13%-16% lower for 1MB files.",
            ],
            table_metrics: FIG20_21_TABLE,
            cases: all,
            seeds: scale.seeds(),
            claims: vec![
                Claim {
                    source: "§7.2, Fig. 20",
                    paper: "ART's redundancy cost is 75-90% lower than OR3's at 1% loss",
                    judge: fig20_cost,
                },
                Claim {
                    source: "§7.4, Fig. 20",
                    paper: "ART's N_max is lower than OR3's (3-16% for 200KB, 13-16% for 1MB)",
                    judge: nmax_vs_or3,
                },
            ],
            asides: fig20_21_asides(),
        }
    }
}

fn fig20_cost(rows: &[AggRow]) -> (Verdict, String) {
    cost_vs_or3(rows, 75.0, 90.0)
}

fn fig21_cost(rows: &[AggRow]) -> (Verdict, String) {
    cost_vs_or3(rows, 12.0, 40.0)
}

/// ART's redundancy reduction against OR3 per group: within the paper's
/// range → reproduced; lower but outside it → partially.
fn cost_vs_or3(rows: &[AggRow], lo: f64, hi: f64) -> (Verdict, String) {
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for g in groups(rows) {
        let pair = |m: &str| Some((mean_of(rows, &g, "art", m)?, mean_of(rows, &g, "or3", m)?));
        let (Some((art, or3)), Some((art_x, or3_x))) = (pair("redundancy"), pair("extra_replicas"))
        else {
            outcomes.push(None);
            continue;
        };
        let total = reduction_pct(art, or3);
        parts.push(format!(
            "{g}: redundancy art {} vs or3 {} ({} vs or3), extra replicas art {} vs or3 {} ({} vs or3)",
            num(art),
            num(or3),
            pct(total),
            num(art_x),
            num(or3_x),
            pct(reduction_pct(art_x, or3_x))
        ));
        outcomes.push(total.map(|r| (r >= lo && r <= hi, r > 0.0)));
    }
    (combine(&outcomes), parts.join("; "))
}

/// A reduction as a signed change for prose (a 20% reduction is `-20%`);
/// `-` when undefined.
fn pct(reduction: Option<f64>) -> String {
    reduction.map_or("-".into(), |r| {
        let change = if r == 0.0 { 0.0 } else { -r };
        format!("{}{}%", if change > 0.0 { "+" } else { "" }, num(change))
    })
}

/// N_max as the paper reads it for Figs. 20-21 (the average over the files
/// of each file's N_max): ART's below OR3's → reproduced; nowhere higher →
/// partially. The whole connection's `n_max` is quoted beside it.
fn nmax_vs_or3(rows: &[AggRow]) -> (Verdict, String) {
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for g in groups(rows) {
        let get = |s: &str, m: &str| mean_of(rows, &g, s, m);
        let (Some(a), Some(o)) = (get("art", "n_max_file_mean"), get("or3", "n_max_file_mean"))
        else {
            outcomes.push(None);
            continue;
        };
        let conn = |s: &str| get(s, "n_max").map_or("-".into(), num);
        parts.push(format!(
            "{g}: mean per-file n_max art {} vs or3 {} ({} vs or3); whole-connection n_max art {} vs or3 {}",
            num(a),
            num(o),
            pct(reduction_pct(a, o)),
            conn("art"),
            conn("or3")
        ));
        outcomes.push(Some((a < o, a <= o)));
    }
    (combine(&outcomes), parts.join("; "))
}

/// Figs. 20-21's comparison under the other readings the runs include.
fn fig20_21_asides() -> Vec<Aside> {
    vec![
        Aside {
            what: "ART against 2n+1, i.e. OR3 with the original transmission counted as \
                   round 1 (3 replicas in the first retransmission round)",
            compute: |rows| versus(rows, "art", "2n+1"),
        },
        Aside {
            what: "art-or3start (levels start at 2n-1, as the authors' artifact \
                   initialises them) against OR3",
            compute: |rows| versus(rows, "art-or3start", "or3"),
        },
    ]
}

/// Redundancy, extra replicas and mean per-file N_max of scheme `a` against
/// scheme `b`, per group.
fn versus(rows: &[AggRow], a: &str, b: &str) -> String {
    let mut parts = Vec::new();
    for g in groups(rows) {
        let pair = |m: &str| Some((mean_of(rows, &g, a, m)?, mean_of(rows, &g, b, m)?));
        let (Some(red), Some(extra), Some(nf)) = (
            pair("redundancy"),
            pair("extra_replicas"),
            pair("n_max_file_mean"),
        ) else {
            parts.push(format!("{g}: runs missing"));
            continue;
        };
        parts.push(format!(
            "{g}: redundancy {a} {} vs {b} {} ({}), extra replicas {} vs {} ({}), \
             mean per-file n_max {} vs {} ({})",
            num(red.0),
            num(red.1),
            pct(reduction_pct(red.0, red.1)),
            num(extra.0),
            num(extra.1),
            pct(reduction_pct(extra.0, extra.1)),
            num(nf.0),
            num(nf.1),
            pct(reduction_pct(nf.0, nf.1)),
        ));
    }
    parts.join("; ")
}

// ---- Fig. 22 ----------------------------------------------------------

pub(super) fn fig22(scale: Scale) -> Experiment {
    let size = scale.pick(100_000_000, 10_000_000, 500_000);
    let group = format!("size={}", size_label(size));
    Experiment {
        name: "fig22",
        title: "Fig. 22: ART against block FEC 9:1 (FCT and redundancy cost)",
        setting: format!(
            "one {} file (the paper does not give the size; the full scale uses 100MB as in Fig. 19), \
             100 Mbit/s, 20 ms RTT, 4% Bernoulli loss both ways, Cubic; schemes quic, \
             fec:9 (9 data + 1 repair packet per block), art. Redundancy = replicas + \
             FEC repair packets",
            size_label(size)
        ),
        paper_numbers: &[
            "§7.2, Fig. 22: bar chart only, no numbers in the text.",
            "§7.2: \"ART does not yield a noteworthy enhancement in FCT when juxtaposed with FEC\".",
            "§7.2: ART \"significantly reduces the redundancy cost\" against FEC 9:1.",
        ],
        table_metrics: &["fct_ms", "redundancy", "replicas", "fec_repairs", "n_max"],
        cases: cases(&group, &["quic", "fec:9", "art"], |s| {
            base(s, 100.0, 20.0, 0.04, Workload::bulk(size))
        }),
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "§7.2, Fig. 22",
                paper: "ART's FCT is about FEC 9:1's (no noteworthy improvement)",
                judge: fig22_fct,
            },
            Claim {
                source: "§7.2, Fig. 22",
                paper: "ART's redundancy cost is significantly lower than FEC 9:1's",
                judge: fig22_cost,
            },
        ],
        asides: vec![],
    }
}

fn fig22_fct(rows: &[AggRow]) -> (Verdict, String) {
    let Some(g) = groups(rows).into_iter().next() else {
        return (Verdict::Undecided, "no runs".into());
    };
    let (Some(art), Some(fec)) = (
        mean_of(rows, &g, "art", "fct_ms"),
        mean_of(rows, &g, "fec:9", "fct_ms"),
    ) else {
        return (Verdict::Undecided, "a scheme has no completed run".into());
    };
    let diff = if fec > 0.0 {
        (art - fec) / fec * 100.0
    } else {
        0.0
    };
    let text = format!(
        "mean fct: art {} ms, fec:9 {} ms ({}{}%)",
        num(art),
        num(fec),
        if diff >= 0.0 { "+" } else { "" },
        num(diff)
    );
    // Within 10%: "about the same"; within 25%: partially.
    (
        combine(&[Some((diff.abs() <= 10.0, diff.abs() <= 25.0))]),
        text,
    )
}

fn fig22_cost(rows: &[AggRow]) -> (Verdict, String) {
    let Some(g) = groups(rows).into_iter().next() else {
        return (Verdict::Undecided, "no runs".into());
    };
    let (Some(art), Some(fec)) = (
        mean_of(rows, &g, "art", "redundancy"),
        mean_of(rows, &g, "fec:9", "redundancy"),
    ) else {
        return (Verdict::Undecided, "a scheme has no completed run".into());
    };
    let red = reduction_pct(art, fec).unwrap_or(0.0);
    let text = format!(
        "mean redundancy: art {} packets, fec:9 {} packets (replicas {} + repairs {}): art {}% lower",
        num(art),
        num(fec),
        mean_of(rows, &g, "fec:9", "replicas").map_or("-".into(), num),
        mean_of(rows, &g, "fec:9", "fec_repairs").map_or("-".into(), num),
        num(red)
    );
    // "Significantly": at least 20% lower.
    (combine(&[Some((red >= 20.0, red > 0.0))]), text)
}

// ---- Fig. 24 ----------------------------------------------------------

pub(super) fn fig24(scale: Scale) -> Experiment {
    let size = scale.pick(100_000_000, 20_000_000, 1_000_000);
    let windows: &[u64] = scale.pick(&[2, 4, 8, 16, 32], &[2, 4, 8, 16, 32], &[2, 8]);
    let mut all = Vec::new();
    for w in windows {
        let group = format!("window={w}MB");
        all.extend(cases(&group, &["quic", "art"], |s| Scenario {
            cc: CongestionAlgorithm::Bbr,
            recv_window: Some(w * 1_000_000),
            ..base(s, 100.0, 300.0, 0.05, Workload::bulk(size))
        }));
    }
    Experiment {
        name: "fig24",
        title: "Fig. 24(b): goodput against the receive window (receiving-buffer starvation)",
        setting: format!(
            "one {} file, 100 Mbit/s, 300 ms RTT, 5% Bernoulli loss both ways, receive \
             windows {} MB; schemes quic, art. Congestion control BBR (deviation: the paper \
             does not name it; with Cubic, 5% loss at 300 ms keeps the window far below \
             every receive window, so the window could not matter)",
            size_label(size),
            windows
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        paper_numbers: &[
            "§7.4, Fig. 24(b): ART \"still fills up the pipe when the receiving buffer size \
             is insufficient for QUIC\"; \"ART improves up to 28% of goodput when receiving \
             buffer size = 8 MB\".",
            "§7.4, Fig. 24(a) (8 MB, 100 runs): ART's lower N_max gives a higher goodput; \
             the text gives no number.",
        ],
        table_metrics: &["goodput_mbps", "n_max", "redundancy", "fct_ms"],
        cases: all,
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "§7.4, Fig. 24(b)",
                paper: "ART's goodput is higher than QUIC's, by up to 28% at an 8 MB window",
                judge: fig24_goodput,
            },
            Claim {
                source: "§7.4, Fig. 24(a)",
                paper: "ART's N_max is lower than QUIC's",
                judge: fig24_nmax,
            },
        ],
        asides: vec![],
    }
}

fn fig24_goodput(rows: &[AggRow]) -> (Verdict, String) {
    let mut parts = Vec::new();
    let mut all_higher = true;
    let mut at8 = None;
    let mut best: Option<f64> = None;
    for g in groups(rows) {
        let (Some(a), Some(q)) = (
            mean_of(rows, &g, "art", "goodput_mbps"),
            mean_of(rows, &g, "quic", "goodput_mbps"),
        ) else {
            return (
                Verdict::Undecided,
                format!("{g}: a scheme has no completed run"),
            );
        };
        let gain = if q > 0.0 { (a - q) / q * 100.0 } else { 0.0 };
        all_higher &= a > q;
        best = Some(best.map_or(gain, |b: f64| b.max(gain)));
        if g == "window=8MB" {
            at8 = Some(gain);
        }
        parts.push(format!(
            "{g}: art {} vs quic {} Mbit/s ({}{}%)",
            num(a),
            num(q),
            if gain > 0.0 { "+" } else { "" },
            num(gain)
        ));
    }
    let gain = at8.or(best).unwrap_or(0.0);
    // Half the paper's +28% or more at 8 MB and ART ahead everywhere.
    let verdict = combine(&[Some((all_higher && gain >= 14.0, gain > 0.0))]);
    (verdict, parts.join("; "))
}

fn fig24_nmax(rows: &[AggRow]) -> (Verdict, String) {
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for g in groups(rows) {
        let a = mean_of(rows, &g, "art", "n_max");
        let q = mean_of(rows, &g, "quic", "n_max");
        let (Some(a), Some(q)) = (a, q) else {
            outcomes.push(None);
            continue;
        };
        parts.push(format!("{g}: {} vs {}", num(a), num(q)));
        outcomes.push(Some((a < q, a <= q)));
    }
    (
        combine(&outcomes),
        format!("mean n_max art vs quic: {}", parts.join("; ")),
    )
}

// ---- Figs. 16-18: ablation ---------------------------------------------

/// The Gilbert-Elliott idle reset of the ablation's burst links, ms.
const ABLATION_BURST_RESET_MS: f64 = 100.0;

pub(super) fn ablation(scale: Scale) -> Experiment {
    let files = scale.pick(200, 50, 3);
    let size = 200_000;
    let schemes = &["art", "art-norand", "art-fix:3", "art-norand:3"];
    let wl = Workload::files(files, size);
    let mut all = Vec::new();
    for (mean, burst) in [(0.02, 4.0), (0.03, 6.0)] {
        let group = format!("gilbert loss={}% burst={burst}", mean * 100.0);
        all.extend(cases(&group, schemes, |s| {
            let mut sc = base(s, 100.0, 30.0, mean, wl);
            sc.link.loss_model = LossKind::Gilbert;
            sc.link.burst = burst;
            // Bursts on the data direction only: acknowledgement bursts of
            // 8 lost the handshake to PTO backoff past the idle timeout.
            sc.link.up.loss = Some(0.0);
            // A burst ends with a silence of 100 ms (> 3 RTTs, longer than
            // any gap of a busy transfer): without it, a burst at a file's
            // tail swallowed every backed-off PTO probe until the 30 s idle
            // timeout (seed 1 at 3%/6, every scheme, plain QUIC included).
            sc.link.burst_reset = BurstReset::AfterMs(ABLATION_BURST_RESET_MS);
            sc
        }));
    }
    // 20 Mbit/s so that Cubic overflows the queue (at 100 Mbit/s and 1%
    // random loss its window never filled 16 packets: the group tested
    // nothing); 0.1% random loss on top.
    let group = "droptail bw=20Mbit/s queue=16 loss=0.1%".to_string();
    all.extend(cases(&group, schemes, |s| {
        let mut sc = base(s, 20.0, 30.0, 0.001, wl);
        sc.link.queue = Some(16);
        sc
    }));
    Experiment {
        name: "ablation",
        title: "Figs. 16-18: the Replica Scheduler under burst loss (ablation)",
        setting: format!(
            "{files} files of 200KB, 100 Mbit/s, 30 ms RTT, Cubic; Gilbert-Elliott loss \
             on the server-to-client (data) direction only (mean 2%, bursts of 4; mean 3%, \
             bursts of 6; with bursts of 8 on both directions the handshake itself timed \
             out; a silence of 100 ms or more ends a burst, see docs/sim.md), and a 16-packet drop-tail queue at 20 Mbit/s with 0.1% random loss both ways; schemes \
             art, art-norand (no scheduler), art-fix:3 and art-norand:3 (R = 3 fixed, with and without the scheduler)"
        ),
        paper_numbers: &[
            "§6.2, Figs. 16-17: replicas sent back to back are lost together in a burst; \
             scheduled replicas escape it (an example, no aggregate numbers).",
            "§6.2, Fig. 18(b): with a fixed redundancy level and small files, \"more replicas \
             are generated when Replica Scheduling is not used\"; the text gives no number.",
        ],
        table_metrics: &["redundancy", "n_max", "share_n_ge_2", "fct_ms"],
        cases: all,
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "§6.2, Fig. 18(b)",
                paper: "ART-fix (R=3, scheduled) sends fewer replicas than ART-norand (R=3, back to back) under burst loss",
                judge: ablation_fixed,
            },
            Claim {
                source: "§6.2 (issue 4 acceptance)",
                paper: "art needs fewer replicas than art-norand for the same recovery (n_max no higher)",
                judge: ablation_adaptive,
            },
        ],
        asides: vec![],
    }
}

fn ablation_fixed(rows: &[AggRow]) -> (Verdict, String) {
    fewer_replicas(rows, "art-fix:3", "art-norand:3")
}

fn ablation_adaptive(rows: &[AggRow]) -> (Verdict, String) {
    fewer_replicas(rows, "art", "art-norand")
}

/// Per group: `a` reproduced when it sends fewer replicas than `b` with an
/// `n_max` no higher; partially when only fewer replicas.
fn fewer_replicas(rows: &[AggRow], a: &str, b: &str) -> (Verdict, String) {
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for g in groups(rows) {
        let (Some(ra), Some(rb)) = (find(rows, &g, a), find(rows, &g, b)) else {
            outcomes.push(None);
            continue;
        };
        let vals = (
            ra.mean("redundancy"),
            rb.mean("redundancy"),
            ra.mean("n_max"),
            rb.mean("n_max"),
        );
        let (Some(ca), Some(cb), Some(na), Some(nb)) = vals else {
            outcomes.push(None);
            continue;
        };
        parts.push(format!(
            "{g}: replicas {a} {} vs {b} {}, n_max {} vs {}",
            num(ca),
            num(cb),
            num(na),
            num(nb)
        ));
        outcomes.push(Some((ca < cb && na <= nb, ca < cb)));
    }
    (combine(&outcomes), parts.join("; "))
}
