//! End to end: every scheme as the sender's policy of a real QUIC connection
//! (two `transport::Endpoint`s, in-memory links, virtual clock), downloading
//! 1 MB over a 100 Mbit/s, 20 ms RTT path with 5% Bernoulli loss each way,
//! or with time-based outages (loss bursts) on the data direction.
//!
//! Run with `--nocapture` to see the per-scheme table (replicas, rounds,
//! n_max, FCT).

mod recorder;

use std::sync::{Arc, Mutex};

use recorder::{Record, Recorded};
use recovery::parse_scheme;
use transport::test_pair::{content, transport_with, Outages, Pair};
use transport::{ConnectionStats, TransportConfig};
use wire::time::Duration;

const SIZE: usize = 1_000_000;
const LOSS: f64 = 0.05;
/// Seeds of the per-scheme runs.
const SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6];
/// Seeds of the ART-versus-QUIC comparison (more: n_max is a maximum, so a
/// single unlucky loss pattern moves it).
const COMPARE_SEEDS: std::ops::RangeInclusive<u64> = 1..=40;

/// One download's results.
struct Outcome {
    stats: ConnectionStats,
    rounds: u64,
    replicas_asked: u64,
    fct_ms: u64,
}

/// Download 1 MB with `scheme` on the sender over 5% Bernoulli loss.
fn run(scheme: &str, seed: u64) -> Outcome {
    run_with(scheme, seed, LOSS, None)
}

/// Download 1 MB with `scheme` on the sender; checks byte-exactness, the
/// replica accounting and the seam invariants of every decision.
fn run_with(scheme: &str, seed: u64, loss: f64, outages: Option<Outages>) -> Outcome {
    let record = Arc::new(Mutex::new(Record::default()));
    let factory = Recorded {
        inner: parse_scheme(scheme).expect("scheme").policy(),
        record: record.clone(),
    };
    let server = transport_with(Arc::new(factory));
    let mut pair = Pair::seeded(server, TransportConfig::default(), seed).with_random_loss(loss);
    pair.outages = outages;
    pair.handshake_limit = Duration::from_secs(30);
    let data = content(SIZE, seed);
    let got = pair.try_download(&data, Duration::from_secs(120));
    let got = got.unwrap_or_else(|e| panic!("{scheme} seed {seed}: {e}"));
    assert!(
        got == data,
        "{scheme} seed {seed}: {} bytes received, not byte-exact",
        got.len()
    );
    let stats = pair.server().stats();
    let r = record.lock().expect("record lock");
    assert!(
        r.violations.is_empty(),
        "{scheme} seed {seed}: {:?}",
        r.violations
    );
    assert!(
        r.rounds > 0,
        "{scheme} seed {seed}: no loss recovered at 5% loss"
    );
    // Every replica the transport sent is counted in the stats, beside
    // the probes' copies of the oldest data in flight (RFC 9002 §6.2.4),
    // which the transport sends on its own.
    let policy_replicas = stats.replicas - stats.probe_copies;
    assert_eq!(policy_replicas, r.replicas_sent, "{scheme} seed {seed}");
    assert!(
        policy_replicas > 0 && policy_replicas <= r.replicas_asked,
        "{scheme} seed {seed}"
    );
    assert!(stats.extra_replicas < stats.replicas);
    Outcome {
        stats,
        rounds: r.rounds,
        replicas_asked: r.replicas_asked,
        fct_ms: pair.now.as_nanos() / 1_000_000,
    }
}

/// Items delivered in round 2 or later (DESIGN.md's `share_n_ge_2`, as a
/// count; not the recovery deterioration rate, which is by latency).
fn n_ge_2_items(o: &Outcome) -> u64 {
    o.stats.recovery.n_hist.iter().skip(2).sum()
}

/// Run `scheme` on `seeds` and print one line per run and the means.
fn sweep(scheme: &str, seeds: &[u64]) -> Vec<Outcome> {
    let out: Vec<Outcome> = seeds.iter().map(|s| run(scheme, *s)).collect();
    for (seed, o) in seeds.iter().zip(&out) {
        eprintln!(
            "{scheme:<12} seed {seed}: rounds {:>3} replicas {:>4} (asked {:>4}) extra {:>4} lost {:>4} n_max {} k_max {:>2} fct {} ms",
            o.rounds, o.stats.replicas, o.replicas_asked, o.stats.extra_replicas, o.stats.lost_packets, o.stats.recovery.n_max, o.stats.recovery.k_max, o.fct_ms
        );
    }
    eprintln!(
        "{scheme:<12} mean of {} seeds: replicas {:.1} extra {:.1} n_max {:.2} n>=2 items {:.2} fct {:.0} ms",
        seeds.len(),
        mean(&out, |o| o.stats.replicas as f64),
        mean(&out, |o| o.stats.extra_replicas as f64),
        mean(&out, |o| f64::from(o.stats.recovery.n_max)),
        mean(&out, |o| n_ge_2_items(o) as f64),
        mean(&out, |o| o.fct_ms as f64),
    );
    out
}

fn mean(out: &[Outcome], f: impl Fn(&Outcome) -> f64) -> f64 {
    out.iter().map(f).sum::<f64>() / out.len() as f64
}

#[test]
fn quic_sends_one_replica_per_round() {
    for o in sweep("quic", SEEDS) {
        assert_eq!(o.stats.extra_replicas, 0);
        assert_eq!(o.replicas_asked, o.rounds);
    }
}

#[test]
fn fixed_3_sends_two_extra_replicas_per_round() {
    for o in sweep("fixed:3", SEEDS) {
        assert_eq!(o.replicas_asked, 3 * o.rounds);
        let ideal = 2 * o.rounds;
        // Replicas still queued when their data is acknowledged are cancelled,
        // so a few rounds may send fewer than 3.
        assert!(
            o.stats.extra_replicas <= ideal,
            "{} > {ideal}",
            o.stats.extra_replicas
        );
        assert!(
            o.stats.extra_replicas * 10 >= ideal * 9,
            "{} far below {ideal}",
            o.stats.extra_replicas
        );
    }
}

#[test]
fn growing_rules_and_art_variants_deliver() {
    for scheme in [
        "2n+1",
        "or3",
        "art-fix:3",
        "art-norand",
        "art-norand:3",
        "art-mab-eg",
        "art-mab-ucb",
        "art-dqn",
    ] {
        for o in sweep(scheme, SEEDS) {
            assert!(o.stats.recovery.n_max >= 1);
        }
    }
}

#[test]
fn art_recovers_in_no_more_rounds_than_quic() {
    let seeds: Vec<u64> = COMPARE_SEEDS.collect();
    let quic = sweep("quic", &seeds);
    let art = sweep("art", &seeds);
    let q = mean(&quic, |o| f64::from(o.stats.recovery.n_max));
    let a = mean(&art, |o| f64::from(o.stats.recovery.n_max));
    eprintln!("mean n_max: quic {q:.2}, art {a:.2}");
    assert!(a <= q, "art's mean n_max {a} above quic's {q}");
    // Fewer lost items need a second round.
    let dq: u64 = quic.iter().map(n_ge_2_items).sum();
    let da: u64 = art.iter().map(n_ge_2_items).sum();
    assert!(da <= dq, "art: {da} items needed >= 2 rounds, quic: {dq}");
    // ART pays for it with extra replicas, but far fewer than fixed:3 would.
    let extra = mean(&art, |o| o.stats.extra_replicas as f64);
    let rounds = mean(&art, |o| o.rounds as f64);
    assert!(
        extra > 0.0 && extra < 2.0 * rounds,
        "art extra {extra}, rounds {rounds}"
    );
}

#[test]
fn runs_are_repeatable() {
    for scheme in ["art", "art-mab-eg", "art-dqn"] {
        let a = run(scheme, 9);
        let b = run(scheme, 9);
        assert_eq!(
            (
                a.stats.replicas,
                a.stats.extra_replicas,
                a.stats.lost_packets,
                &a.stats.recovery.n_hist,
                a.rounds,
                a.fct_ms
            ),
            (
                b.stats.replicas,
                b.stats.extra_replicas,
                b.stats.lost_packets,
                &b.stats.recovery.n_hist,
                b.rounds,
                b.fct_ms
            ),
            "{scheme}"
        );
    }
}

/// Journal Fig. 18(b): under burst loss, replicas spread by the Replica
/// Scheduler escape the burst that takes back-to-back replicas, so fewer
/// lost items need another round and fewer replicas are sent in all.
#[test]
fn replica_scheduler_beats_back_to_back_under_outages() {
    // 2% of data datagrams start a 3 ms outage of the data direction.
    let outages = |scheme: &str| -> Vec<Outcome> {
        let out: Vec<Outcome> = COMPARE_SEEDS
            .map(|s| {
                let outages = Outages {
                    probability: 0.02,
                    length: Duration::from_millis(3),
                };
                run_with(scheme, s, 0.0, Some(outages))
            })
            .collect();
        eprintln!(
            "{scheme:<12} outages, mean of {} seeds: replicas {:.1} n_max {:.2} n>=2 items {:.2} fct {:.0} ms",
            out.len(),
            mean(&out, |o| o.stats.replicas as f64),
            mean(&out, |o| f64::from(o.stats.recovery.n_max)),
            mean(&out, |o| n_ge_2_items(o) as f64),
            mean(&out, |o| o.fct_ms as f64),
        );
        out
    };
    for (spread, together) in [("art-fix:3", "art-norand:3"), ("art", "art-norand")] {
        let s = outages(spread);
        let t = outages(together);
        let (ds, dt) = (
            mean(&s, |o| n_ge_2_items(o) as f64),
            mean(&t, |o| n_ge_2_items(o) as f64),
        );
        assert!(
            ds < dt,
            "{spread}: {ds} items needed >= 2 rounds, {together}: {dt}"
        );
        let (rs, rt) = (
            mean(&s, |o| o.stats.replicas as f64),
            mean(&t, |o| o.stats.replicas as f64),
        );
        assert!(rs < rt, "{spread}: {rs} replicas, {together}: {rt}");
        let (ns, nt) = (
            mean(&s, |o| f64::from(o.stats.recovery.n_max)),
            mean(&t, |o| f64::from(o.stats.recovery.n_max)),
        );
        assert!(ns <= nt, "{spread}: n_max {ns}, {together}: {nt}");
    }
    outages("quic");
}
