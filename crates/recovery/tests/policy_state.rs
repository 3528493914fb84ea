//! ART's state in qlog (issue 9 acceptance): over a lossy transfer, the
//! sender's trace carries `artq:policy_state` events whose redundancy level
//! and replica-loss share change over time, as qvis shows them, and the
//! `artq:policy_event`s a policy publishes through its context (each
//! round's level, B_max and escape space).

use std::io::Write;
use std::sync::{Arc, Mutex};

use recovery::parse_scheme;
use transport::events::QlogWriter;
use transport::test_pair::{content, Pair};
use transport::TransportConfig;
use wire::time::Duration;

/// A qlog sink the test can read afterwards.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The `data` objects of every event named `name`, in order.
fn events(qlog: &[u8], name: &str) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(qlog)
        .split('\x1e')
        .filter_map(|rec| serde_json::from_str::<serde_json::Value>(rec.trim()).ok())
        .filter(|v| v["name"] == name)
        .map(|v| v["data"].clone())
        .collect()
}

/// The `artq:policy_state` and `artq:policy_event` events of a transfer.
struct Trace {
    states: Vec<serde_json::Value>,
    events: Vec<serde_json::Value>,
}

fn run(scheme: &str, loss: f64) -> Trace {
    let mut server = TransportConfig::default();
    parse_scheme(scheme).expect("scheme").configure(&mut server);
    let mut pair = Pair::seeded(server, TransportConfig::default(), 4).with_random_loss(loss);
    // Subscribe as soon as the server's connection exists, before the
    // handshake's events are consumed by `download`.
    pair.drive_until(Duration::from_secs(5), |p| p.server_opt().is_some());
    let sink = Shared::default();
    pair.server().subscribe(Box::new(QlogWriter::new(
        sink.clone(),
        "policy_state",
        true,
    )));
    let data = content(1_000_000, 9);
    assert!(pair.download(&data, Duration::from_secs(120)) == data);
    drop(pair);
    let bytes = sink.0.lock().unwrap().clone();
    Trace {
        states: events(&bytes, "artq:policy_state"),
        events: events(&bytes, "artq:policy_event"),
    }
}

#[test]
fn art_traces_its_levels_and_replica_loss_share() {
    let trace = run("art", 0.08);
    let states = trace.states;
    assert!(states.len() >= 2, "{} policy_state events", states.len());
    for s in &states {
        assert!(s["r_1"].as_f64().is_some_and(|r| r >= 1.0), "{s}");
        assert!(
            s["replica_loss_share"]
                .as_f64()
                .is_some_and(|p| (0.0..=1.0).contains(&p)),
            "{s}"
        );
    }
    // Published only on change, so consecutive events differ; and the
    // replica-loss share moved during the run.
    assert!(states.windows(2).all(|w| w[0] != w[1]));
    let shares: Vec<f64> = states
        .iter()
        .filter_map(|s| s["replica_loss_share"].as_f64())
        .collect();
    assert!(
        shares.iter().any(|&p| p != shares[0]),
        "replica-loss share never changed: {shares:?}"
    );
}

#[test]
fn art_publishes_each_rounds_level_burst_and_escape_space() {
    let events = run("art", 0.08).events;
    let rounds: Vec<_> = events
        .iter()
        .filter(|e| e["name"] == "round_level")
        .collect();
    assert!(rounds.len() >= 10, "{} round_level events", rounds.len());
    for e in &rounds {
        let get = |k: &str| e[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {e}"));
        assert!(get("round") >= 1.0 && get("level") >= 1.0, "{e}");
        assert!(get("escape_space") >= 1.0 && get("b_max") >= 0.0, "{e}");
    }
    // Losses come in bursts of various lengths over 8% loss.
    assert!(
        rounds.iter().any(|e| e["b_max"].as_f64() >= Some(2.0)),
        "B_max never above 1"
    );
}

#[test]
fn the_bandit_traces_its_best_arm() {
    let states = run("art-mab-eg", 0.08).states;
    assert!(!states.is_empty());
    let last = states.last().expect("a state");
    assert!(
        last["best_level"].as_f64().is_some_and(|l| l >= 1.0),
        "{last}"
    );
    assert!(last["pulls"].as_f64().is_some_and(|p| p >= 10.0), "{last}");
    assert!(last["best_mean_reward"].as_f64().is_some(), "{last}");
}

#[test]
fn plain_quic_reports_no_state() {
    let trace = run("quic", 0.05);
    assert!(trace.states.is_empty() && trace.events.is_empty());
}
