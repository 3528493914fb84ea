//! Unit and property tests of the experiment layer: aggregation, verdicts
//! from synthetic rows, definitions, and one tiny real experiment.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn row(group: &str, scheme: &str, seed: u64, vals: &[(&str, f64)]) -> RunRow {
    RunRow {
        group: group.into(),
        scheme: scheme.into(),
        seed,
        error: None,
        metrics: vals.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

fn case(group: &str, scheme: &str) -> Case {
    Case {
        group: group.into(),
        scheme: scheme.into(),
        scenario: Scenario::default(),
    }
}

#[test]
fn aggregate_takes_mean_min_max_and_skips_failures() {
    let cases = [case("g", "art"), case("g", "or3")];
    let mut failed = row("g", "art", 3, &[]);
    failed.error = Some("boom".into());
    let runs = vec![
        row("g", "art", 1, &[("replicas", 10.0)]),
        row("g", "art", 2, &[("replicas", 20.0)]),
        failed,
    ];
    let rows = aggregate(&cases, &runs);
    assert_eq!(rows.len(), 2);
    let art = &rows[0];
    assert_eq!((art.runs, art.failed), (2, 1));
    assert_eq!(
        art.metrics.get("replicas"),
        Some(&Stat {
            mean: 15.0,
            sd: 7.071068,
            min: 10.0,
            max: 20.0
        })
    );
    assert_eq!(rows[1].runs, 0);
    assert_eq!(rows[1].mean("replicas"), None);
}

fn agg(group: &str, scheme: &str, vals: &[(&str, f64)]) -> AggRow {
    AggRow {
        group: group.into(),
        scheme: scheme.into(),
        runs: 1,
        failed: 0,
        metrics: vals
            .iter()
            .map(|(k, v)| (k.to_string(), Stat::of(&[*v])))
            .collect::<BTreeMap<_, _>>(),
    }
}

fn judge_with(exp: &str, claim: usize, rows: &[AggRow]) -> Verdict {
    let e = experiment(exp, Scale::Tiny).expect("known experiment");
    let c = e.claims.get(claim).expect("claim exists");
    (c.judge)(rows).0
}

#[test]
fn fig20_cost_claim_follows_the_numbers() {
    let with = |art: f64| {
        vec![
            agg(
                "a",
                "or3",
                &[("redundancy", 100.0), ("extra_replicas", 10.0)],
            ),
            agg("a", "art", &[("redundancy", art), ("extra_replicas", 1.0)]),
        ]
    };
    assert_eq!(judge_with("fig20", 0, &with(20.0)), Verdict::Reproduced);
    assert_eq!(judge_with("fig20", 0, &with(60.0)), Verdict::Partially);
    assert_eq!(judge_with("fig20", 0, &with(120.0)), Verdict::NotReproduced);
    assert_eq!(judge_with("fig20", 0, &[]), Verdict::Undecided);
    // 10% loss: 12-40% lower.
    assert_eq!(judge_with("fig21", 0, &with(70.0)), Verdict::Reproduced);
    assert_eq!(judge_with("fig21", 0, &with(20.0)), Verdict::Partially);
}

#[test]
fn fig19_claims_follow_the_numbers() {
    let rows = |art_n: f64, art_r: f64| {
        vec![
            agg("g", "quic", &[("n_max", 4.0), ("redundancy", 100.0)]),
            agg("g", "2n+1", &[("n_max", 3.0), ("redundancy", 300.0)]),
            agg("g", "or3", &[("n_max", 3.0), ("redundancy", 200.0)]),
            agg("g", "art", &[("n_max", art_n), ("redundancy", art_r)]),
        ]
    };
    assert_eq!(
        judge_with("fig19", 0, &rows(2.0, 150.0)),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("fig19", 0, &rows(3.0, 150.0)),
        Verdict::Partially
    );
    assert_eq!(
        judge_with("fig19", 0, &rows(5.0, 150.0)),
        Verdict::NotReproduced
    );
    assert_eq!(
        judge_with("fig19", 1, &rows(2.0, 150.0)),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("fig19", 1, &rows(2.0, 250.0)),
        Verdict::Partially
    );
    assert_eq!(
        judge_with("fig19", 1, &rows(2.0, 350.0)),
        Verdict::NotReproduced
    );
}

#[test]
fn the_registry_names_each_experiment_once_and_gives_variants_their_runner() {
    for (i, e) in REGISTRY.iter().enumerate() {
        assert!(!e.help.is_empty(), "{}", e.name);
        assert!(
            REGISTRY.iter().skip(i + 1).all(|o| o.name != e.name),
            "{}",
            e.name
        );
    }
    assert_eq!(EXPERIMENTS.len(), REGISTRY.len());
    // Experiment 4's runner serves its variants (the names it registers);
    // the figures' variants run as single simulations, like the figures.
    for name in ["rcp-exp4", "rcp-exp4-drain", "rcp-exp4-dumbbell"] {
        assert!(case_runner(name).is_some(), "{name}");
    }
    for name in [
        "rcp-fig5",
        "rcp-fig5-drain",
        "rcp-fig9-dumbbell",
        "fig19",
        "nothing",
    ] {
        assert!(case_runner(name).is_none(), "{name}");
    }
    for name in ["art-fig23", "art-fig27", "art-dqn-heldout"] {
        assert!(case_runner(name).is_some(), "{name}");
    }
    let help = help_text();
    assert!(EXPERIMENTS.iter().all(|n| help.contains(n)), "{help}");
}

#[test]
fn every_named_experiment_exists_at_every_scale() {
    for scale in [Scale::Full, Scale::Quick, Scale::Tiny] {
        for name in EXPERIMENTS {
            let e = experiment(name, scale).expect("defined");
            assert_eq!(e.name, *name);
            assert!(!e.cases.is_empty() && !e.claims.is_empty());
            assert!(!e.seeds.is_empty());
            if e.name.starts_with("fig") || e.name == "ablation" {
                assert_eq!(e.seeds, scale.seeds());
            }
            if case_runner(e.name).is_some() {
                continue;
            }
            for c in &e.cases {
                // The scheme, or its base name when options vary per
                // group (RCP's utility options).
                let base = c.scenario.scheme.split(':').next().unwrap_or_default();
                assert!(c.scheme == c.scenario.scheme || c.scheme == base, "{c:?}");
                recovery::parse_scheme(&c.scheme).expect("scheme is registered");
                c.scenario.validate().expect("valid scenario");
                c.scenario.link.configs().expect("valid link");
            }
        }
    }
    assert!(experiment("fig23", Scale::Quick).is_none());
    assert_eq!(Scale::Full.seeds().len(), 3);
    // The RCP variants are registered too, under their own names.
    for name in scenarios::VARIANT_NAMES {
        let e = experiment(name, Scale::Tiny).expect("defined");
        assert_eq!(e.name, *name);
        assert!(!e.cases.is_empty());
    }
    let Err(err) = select(&["rcp-fig6".to_string()], Scale::Tiny) else {
        panic!("rcp-fig6 is not an experiment")
    };
    assert!(err.contains("rcp-fig5-dumbbell"), "{err}");
}

#[test]
fn tiny_fig22_runs_deterministically_and_counts_fec_repairs() {
    let e = experiment("fig22", Scale::Tiny).expect("defined");
    let mut seen = 0;
    let a = evaluate(&e, 2, &mut |_d: &RunDone<'_>| seen += 1);
    assert_eq!(seen, e.cases.len() * e.seeds.len());
    let b = evaluate(&e, 1, &mut |_d: &RunDone<'_>| {});
    assert_eq!(
        report::results_json(Scale::Tiny, std::slice::from_ref(&a)),
        report::results_json(Scale::Tiny, &[b])
    );
    assert!(a.runs.iter().all(|r| r.error.is_none()), "{:?}", a.runs);
    let fec = find(&a.rows, &a.rows[0].group, "fec:9").expect("fec row");
    let repairs = fec.mean("fec_repairs").expect("measured");
    assert!(repairs > 0.0, "fec:9 sends repair packets");
    assert_eq!(
        fec.mean("redundancy"),
        Some(round6(fec.mean("replicas").unwrap_or(0.0) + repairs))
    );
    let quic = find(&a.rows, &a.rows[0].group, "quic").expect("quic row");
    assert_eq!(quic.mean("fec_repairs"), Some(0.0));
    let md = report::report_md(Scale::Tiny, &[e], &[a]);
    assert!(md.contains("## fig22") && md.contains("| fec:9 |"), "{md}");
}

#[test]
fn experiments_from_one_queue_give_each_experiment_its_own_rows() {
    let exps = [
        experiment("fig22", Scale::Tiny).expect("defined"),
        experiment("art-fig12", Scale::Tiny).expect("defined"),
    ];
    let mut seen: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
    let pooled = evaluate_all(&exps, 3, &mut |d: &RunDone<'_>| {
        seen.entry(d.experiment.to_string())
            .or_default()
            .push((d.done, d.total));
    });
    for (exp, result) in exps.iter().zip(&pooled) {
        let alone = evaluate(exp, 1, &mut |_d: &RunDone<'_>| {});
        assert_eq!(
            report::results_json(Scale::Tiny, std::slice::from_ref(result)),
            report::results_json(Scale::Tiny, &[alone])
        );
        // Each experiment counts its own runs, 1..=total, in order.
        let total = exp.cases.len() * exp.seeds.len();
        let want: Vec<(usize, usize)> = (1..=total).map(|d| (d, total)).collect();
        assert_eq!(seen.get(exp.name), Some(&want), "{}", exp.name);
    }
}

#[test]
fn fig26_claims_follow_the_numbers() {
    let rows = |q: f64, a: f64, file_a: f64| {
        let m = |v: f64| {
            vec![
                ("rpc_fct_mean_ms", v),
                ("rpc_fct_p50_ms", v),
                ("rpc_fct_p95_ms", v),
                ("rpc_fct_p99_ms", v),
            ]
        };
        vec![
            agg("rpc p=1%", "quic", &m(100.0)),
            agg("rpc p=1%", "art", &m(95.0)),
            agg("rpc p=10%", "quic", &m(q)),
            agg("rpc p=10%", "art", &m(a)),
            agg("3MB file p=2%", "quic", &[("fct_ms", 1000.0)]),
            agg("3MB file p=2%", "art", &[("fct_ms", file_a)]),
        ]
    };
    // 30% better at the highest loss, growing: reproduced.
    assert_eq!(
        judge_with("art-fig26", 0, &rows(200.0, 140.0, 980.0)),
        Verdict::Reproduced
    );
    // 3% at the highest loss: right direction, too small.
    assert_eq!(
        judge_with("art-fig26", 0, &rows(200.0, 194.0, 980.0)),
        Verdict::Partially
    );
    // Worse at the highest loss: not reproduced.
    assert_eq!(
        judge_with("art-fig26", 0, &rows(100.0, 120.0, 980.0)),
        Verdict::NotReproduced
    );
    assert_eq!(
        judge_with("art-fig26", 1, &rows(200.0, 140.0, 980.0)),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("art-fig26", 2, &rows(200.0, 140.0, 980.0)),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("art-fig26", 2, &rows(200.0, 140.0, 1010.0)),
        Verdict::NotReproduced
    );
}

#[test]
fn fig12_and_fig15_claims_follow_the_numbers() {
    let fig12 = |n: [f64; 4]| {
        ["quic", "art-fix:3", "art-fix:5", "art-fix:8"]
            .iter()
            .zip(n)
            .enumerate()
            .map(|(i, (s, n))| {
                agg(
                    "p=5%",
                    s,
                    &[("redundancy", 10.0 * (i + 1) as f64), ("n_max", n)],
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        judge_with("art-fig12", 0, &fig12([3.0, 2.0, 2.0, 1.0])),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("art-fig12", 1, &fig12([3.0, 2.0, 2.0, 1.0])),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("art-fig12", 1, &fig12([3.0, 1.0, 2.0, 1.0])),
        Verdict::Partially
    );
    assert_eq!(
        judge_with("art-fig12", 1, &fig12([1.0, 1.0, 2.0, 2.0])),
        Verdict::NotReproduced
    );
    let fig15 = |r1: f64, r50: f64| {
        vec![
            agg(
                "g",
                "art:l_queue=1",
                &[("redundancy", r1), ("fct_ms", 100.0)],
            ),
            agg(
                "g",
                "art:l_queue=10",
                &[("redundancy", 100.0), ("fct_ms", 100.0)],
            ),
            agg(
                "g",
                "art:l_queue=50",
                &[("redundancy", r50), ("fct_ms", 105.0)],
            ),
        ]
    };
    assert_eq!(
        judge_with("art-fig15", 0, &fig15(120.0, 110.0)),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("art-fig15", 0, &fig15(120.0, 130.0)),
        Verdict::Partially
    );
    assert_eq!(
        judge_with("art-fig15", 0, &fig15(120.0, 200.0)),
        Verdict::NotReproduced
    );
    assert_eq!(
        judge_with("art-fig15", 1, &fig15(120.0, 110.0)),
        Verdict::Reproduced
    );
    assert_eq!(
        judge_with("art-fig15", 1, &fig15(90.0, 110.0)),
        Verdict::NotReproduced
    );
    assert_eq!(
        judge_with("art-fig15", 2, &fig15(120.0, 110.0)),
        Verdict::Reproduced
    );
}

#[test]
fn tiny_rpc_and_paired_experiments_run_deterministically() {
    for name in ["art-fig26", "art-fig23"] {
        let e = experiment(name, Scale::Tiny).expect("defined");
        let a = evaluate(&e, 2, &mut |_d: &RunDone<'_>| {});
        let b = evaluate(&e, 1, &mut |_d: &RunDone<'_>| {});
        assert_eq!(
            report::results_json(Scale::Tiny, std::slice::from_ref(&a)),
            report::results_json(Scale::Tiny, &[b]),
            "{name}"
        );
        assert!(a.runs.iter().all(|r| r.error.is_none()), "{:?}", a.runs);
        for row in &a.rows {
            for (m, s) in &row.metrics {
                assert!(s.mean.is_finite() && s.min <= s.mean + 1e-6, "{name} {m}");
            }
        }
    }
    let e = experiment("art-fig26", Scale::Tiny).expect("defined");
    let r = evaluate(&e, 2, &mut |_d: &RunDone<'_>| {});
    let rpc = find(&r.rows, "rpc p=5%", "art").expect("rpc row");
    let p50 = rpc.mean("rpc_fct_p50_ms").expect("rpc metrics");
    let p99 = rpc.mean("rpc_fct_p99_ms").expect("rpc metrics");
    // Every call takes at least one 60 ms round trip.
    assert!((60.0..1000.0).contains(&p50) && p99 >= p50, "{p50} {p99}");
    let file = find(&r.rows, "3MB file p=2%", "quic").expect("file row");
    assert_eq!(
        file.mean("rpc_fct_p50_ms"),
        None,
        "file runs have no rpc metrics"
    );
    let e = experiment("art-fig23", Scale::Tiny).expect("defined");
    let r = evaluate(&e, 1, &mut |_d: &RunDone<'_>| {});
    let pooled = &r.rows[0];
    assert!(
        pooled.mean("paired_packets").unwrap_or(0.0) > 0.0,
        "{pooled:?}"
    );
    let share = pooled.mean("share_dn_pos").expect("measured");
    assert!((0.0..=1.0).contains(&share));
}

proptest! {
    #[test]
    fn aggregated_mean_lies_between_min_and_max(vals in proptest::collection::vec(0.0f64..1e9, 1..8)) {
        let cases = [case("g", "s")];
        let runs: Vec<RunRow> = vals
            .iter()
            .enumerate()
            .map(|(i, v)| row("g", "s", i as u64, &[("fct_ms", *v)]))
            .collect();
        let rows = aggregate(&cases, &runs);
        let s = rows[0].metrics.get("fct_ms").copied().expect("present");
        prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
        prop_assert_eq!(rows[0].runs, vals.len());
    }
}
