//! RCP's Experiment 4 (rcp.md §V-F, Table V, Table VI): does RCP keep the
//! network stable when congestion sets in?
//!
//! **The network** (Fig. 10, Table V): five clients, one message per slot
//! each, through one bottleneck whose service rate falls from 7 to 3
//! packets per slot at slot 5000 (`netem::RateSchedule`), 100 slots of
//! propagation delay, no random drops, a 1000-packet drop-tail queue.
//! Clients 1 and 2 are background UDP; clients 3, 4 and 5 run RCP, ARQ and
//! UDP. RCP's utility has alpha 2 and beta 0.8; RCP and ARQ start with an
//! RTO of 30 slots. The paper runs 25000 slots; quick scale 10000 (the
//! change still at slot 5000), tiny 2000 (the change at slot 1000).
//!
//! **One run measures one client.** Each case is the whole five-client
//! network; the case's scheme is the client measured (the run's main
//! flow) and the other two are extra flows, so every row comes from the
//! same network, run once per measured client.
//!
//! **Normalisation** (eqs. 11-12, as Figs. 5, 7 and 8): tuned from the UDP
//! and ARQ clients' loss and latency in one calibration run of this
//! network (seed 1) in which client 3 runs ARQ instead of RCP (at beta 0.8
//! RCP behaves much like ARQ, the paper's Fig. 12). Table V does not say
//! how the paper normalised; this is the same rule its other figures use.
//!
//! **Fig. 13** (RCP's retransmission attempts over time) becomes three
//! rates, retransmissions per 1000 slots ([`exp4_run`]): `retx_before`
//! (before the slow-down), `retx_early` (the [`EARLY_SLOTS`] slots after
//! it, when the paper's attempts rise) and `retx_late` (from [`LATE_FROM`]
//! slots after it to the end, when the paper's have settled lower). A
//! retransmitted message counts when its recovery ends (delivered or given
//! up), an RTO or two after the retransmission. `retx_late` needs the full
//! run (quick scale stops before it). Figs. 11-12 (throughput over time)
//! are not reproduced.

use std::collections::BTreeMap;

use super::defs::num;
use super::rcp::{Dumbbell, MESSAGE_BYTES, SLOT_MS};
use super::{mean_of, AggRow, Case, Claim, Experiment, RunRow, Scale, Verdict};
use crate::run::run;
use crate::scenario::Scenario;

/// The group name of the single setting.
const GROUP: &str = "table5";

/// Table V's network with `slots` slots and the rate change at `at`.
fn network(slots: u64, at: u64) -> Dumbbell {
    Dumbbell {
        service: 7.0,
        delay_slots: 100.0,
        drop: 0.0,
        queue: 1000,
        background: 2,
        slots,
        change: Some((at, 3.0)),
    }
}

/// The clients under test, in Fig. 10's order (clients 3, 4, 5).
const CLIENTS: [&str; 3] = ["rcp", "arq", "udp"];

/// `(eps_udp, eps_arq, l_udp_ms, l_arq_ms)` measured on `net` with client 3
/// running ARQ (seed 1), or `None` if the run fails.
fn calibrate(net: &Dumbbell) -> Option<(f64, f64, f64, f64)> {
    // Measured: client 5 (udp) as the main flow; clients 3 and 4 run arq.
    let r = run(&net.network("udp", &["arq".to_string(), "arq".to_string()])).ok()?;
    let udp = &r.metrics;
    let arq = r.flows.get(net.background + 1)?;
    Some((
        1.0 - udp.delivery_ratio?,
        1.0 - arq.delivery_ratio?,
        udp.mean_latency_ms?,
        arq.mean_latency_ms?,
    ))
}

/// Slots after the slow-down in which Fig. 13's attempts rise.
pub const EARLY_SLOTS: u64 = 4000;
/// Slots after the slow-down from which Fig. 13's attempts have settled
/// (the paper: stable after slot 12000, 7000 after the change).
pub const LATE_FROM: u64 = 7000;

/// Runs one case: Table VI's metrics of the measured client, plus its
/// retransmissions per 1000 slots before the slow-down, early after it
/// and late after it (Fig. 13; `retx_late` only when the run reaches it).
pub fn exp4_run(case: &Case, seed: u64) -> Result<BTreeMap<String, f64>, String> {
    let scenario = Scenario {
        seed,
        ..case.scenario.clone()
    };
    let r = run(&scenario).map_err(|e| e.to_string())?;
    let mut metrics = RunRow::from_result(case, seed, &r).metrics;
    let change = scenario
        .link
        .bw_change
        .as_ref()
        .and_then(|c| c.changes().first().map(|&(at, _)| at))
        .ok_or("the scenario has no rate change")?;
    // The slot an instant (since the start) falls in.
    let slot_ns = wire::time::Duration::from_secs_f64(SLOT_MS / 1e3)
        .as_nanos()
        .max(1);
    let slot_of = |since_start: wire::time::Duration| since_start.as_nanos() / slot_ns;
    let change_slot = u64::try_from(slot_of(change)).unwrap_or(0);
    // One message per slot: the last message's slot ends the run.
    let apps::workload::Workload::Messages { params } = &case.scenario.workload else {
        return Err("rcp-exp4 runs the message workload".into());
    };
    let end_slot = params.messages;
    let windows = [
        ("retx_before", 0, change_slot),
        ("retx_early", change_slot, change_slot + EARLY_SLOTS),
        ("retx_late", change_slot + LATE_FROM, end_slot),
    ];
    for (name, from, to) in windows {
        if to <= from || to > end_slot {
            continue;
        }
        let count: u64 = r
            .message_retransmissions
            .iter()
            .filter(|(t, _)| (u128::from(from)..u128::from(to)).contains(&slot_of(t.since_epoch())))
            .map(|&(_, n)| u64::from(n))
            .sum();
        metrics.insert(name.into(), count as f64 * 1000.0 / (to - from) as f64);
    }
    Ok(metrics)
}

/// Experiment 4: Table VI.
pub fn exp4(scale: Scale) -> Experiment {
    let (slots, at) = scale.pick((25_000, 5_000), (10_000, 5_000), (2_000, 1_000));
    let net = network(slots, at);
    let (options, norm_words) = match calibrate(&net) {
        Some((eu, ea, lu, la)) => (
            format!("norm=tuned,eps_udp={eu},eps_arq={ea},l_udp={lu},l_arq={la}"),
            format!(
                "eqs. 11-12 tuned from a calibration run with client 3 on arq (seed 1): \
                 eps_udp {}, eps_arq {}, l_udp {} ms, l_arq {} ms",
                num(eu),
                num(ea),
                num(lu),
                num(la)
            ),
        ),
        None => (
            "norm=simple".to_string(),
            "calibration failed: the simple normalisation".to_string(),
        ),
    };
    let scheme = |base: &str| {
        format!(
            "{base}:alpha=2,beta=0.8,initial_rto={},{options}",
            30.0 * SLOT_MS
        )
    };
    let cases = CLIENTS
        .iter()
        .map(|&measured| {
            let others: Vec<String> = CLIENTS
                .iter()
                .filter(|&&c| c != measured)
                .map(|c| scheme(c))
                .collect();
            Case {
                group: GROUP.into(),
                scheme: measured.into(),
                scenario: net.network(&scheme(measured), &others),
            }
        })
        .collect();
    Experiment {
        name: "rcp-exp4",
        title: "RCP Experiment 4 (Table VI): RCP, ARQ and UDP when the bottleneck slows from 7 to 3 packets per slot",
        setting: format!(
            "Table V / Fig. 10, slot {SLOT_MS} ms: five clients sending one {MESSAGE_BYTES}-byte \
             message per slot (two background UDP, then RCP, ARQ, UDP), bottleneck 7 \
             packets/slot falling to 3 at slot {at}, {} slots one way, no random drops, \
             1000-packet queue, {slots} slots; alpha 2, beta 0.8, initial RTO 30 slots; {norm_words}; \
             each case runs the whole network and measures its scheme's client",
            net.delay_slots
        ),
        paper_numbers: &[
            "Table VI: UDP epsilon 0.443, l 273.110, U -0.531; ARQ epsilon 0.151, l 1551.363, U -0.267; RCP epsilon 0.288, l 577.592, U -0.200.",
            "Fig. 13: RCP's retransmission attempts rise after the slow-down (slot 5000) until about slot 9000, then fall as it learns (stable after slot 12000).",
        ],
        table_metrics: &[
            "utility",
            "loss",
            "mean_latency_ms",
            "retransmission_probability",
            "retx_before",
            "retx_early",
            "retx_late",
        ],
        cases,
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "Table VI",
                paper: "RCP achieves the best utility of the three (-0.200 against ARQ -0.267 and UDP -0.531)",
                judge: judge_rcp_best,
            },
            Claim {
                source: "Table VI",
                paper: "RCP sits between UDP and ARQ: less loss than UDP, less latency than ARQ",
                judge: judge_rcp_between,
            },
            Claim {
                source: "Fig. 13",
                paper: "RCP's retransmission attempts rise after the slow-down, then fall as it learns",
                judge: judge_attempts,
            },
        ],
        asides: Vec::new(),
    }
}

fn utilities(rows: &[AggRow]) -> Option<[f64; 3]> {
    let u = |s: &str| mean_of(rows, GROUP, s, "utility");
    Some([u("rcp")?, u("arq")?, u("udp")?])
}

fn judge_rcp_best(rows: &[AggRow]) -> (Verdict, String) {
    let Some([r, a, u]) = utilities(rows) else {
        return (Verdict::Undecided, "a run is missing".into());
    };
    let ours = format!("utility: rcp {}, arq {}, udp {}", num(r), num(a), num(u));
    let v = if r >= a.max(u) {
        Verdict::Reproduced
    } else if r > a.min(u) {
        Verdict::Partially
    } else {
        Verdict::NotReproduced
    };
    (v, ours)
}

fn judge_rcp_between(rows: &[AggRow]) -> (Verdict, String) {
    let get = |s: &str, m: &str| mean_of(rows, GROUP, s, m);
    let (Some(er), Some(ea), Some(eu), Some(lr), Some(la), Some(lu)) = (
        get("rcp", "loss"),
        get("arq", "loss"),
        get("udp", "loss"),
        get("rcp", "mean_latency_ms"),
        get("arq", "mean_latency_ms"),
        get("udp", "mean_latency_ms"),
    ) else {
        return (Verdict::Undecided, "a run is missing".into());
    };
    let ours = format!(
        "epsilon: rcp {}, arq {}, udp {}; l: rcp {} ms, arq {} ms, udp {} ms",
        num(er),
        num(ea),
        num(eu),
        num(lr),
        num(la),
        num(lu)
    );
    let loss_between = er < eu;
    let latency_between = lr < la;
    let v = match (loss_between, latency_between) {
        (true, true) => Verdict::Reproduced,
        (true, false) | (false, true) => Verdict::Partially,
        (false, false) => Verdict::NotReproduced,
    };
    (v, ours)
}

fn judge_attempts(rows: &[AggRow]) -> (Verdict, String) {
    let get = |m: &str| mean_of(rows, GROUP, "rcp", m);
    let (Some(before), Some(early)) = (get("retx_before"), get("retx_early")) else {
        return (Verdict::Undecided, "a run is missing".into());
    };
    let Some(late) = get("retx_late") else {
        return (
            Verdict::Undecided,
            format!(
                "rcp's retransmissions per 1000 slots: before {}, early after {}; the run ends before the late window (full scale only)",
                num(before),
                num(early)
            ),
        );
    };
    let ours = format!(
        "rcp's retransmissions per 1000 slots: before the slow-down {}, in the {EARLY_SLOTS} slots after {}, from {LATE_FROM} slots after to the end {}",
        num(before),
        num(early),
        num(late)
    );
    let v = match (early > before, late < early) {
        (true, true) => Verdict::Reproduced,
        (true, false) | (false, true) => Verdict::Partially,
        (false, false) => Verdict::NotReproduced,
    };
    (v, ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_is_table_5_with_the_rate_falling_at_the_change() {
        let net = network(25_000, 5_000);
        let s = net.network("rcp", &["arq".to_string(), "udp".to_string()]);
        assert_eq!(s.flows.len(), 4);
        let schemes: Vec<&str> = s.flows.iter().map(|f| f.scheme.as_str()).collect();
        assert_eq!(schemes, ["udp", "udp", "arq", "udp"]);
        let change = s.link.bw_change.as_ref().expect("a rate change");
        let (at, bps) = change.changes()[0];
        assert_eq!(at.as_secs_f64(), 5.0);
        // 3 packets of 160 bytes per 1 ms slot; 7 before.
        assert_eq!(bps, 3_840_000);
        assert!((s.link.bw.unwrap_or(0.0) - 8.96).abs() < 1e-9);
        assert_eq!(s.link.down.loss, Some(0.0));
        assert_eq!(s.link.queue, Some(1000));
    }
}
