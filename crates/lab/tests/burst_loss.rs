//! Gilbert-Elliott burst loss with the link's defaults (issue 15, bug 7):
//! downloads must complete. With the plain per-packet chain, a burst that
//! began at a transfer's tail outlasted every silence and swallowed each
//! backed-off PTO probe until the 30 s idle timeout: 6 of these 7 seeds
//! ended that way. The default idle reset (a silence of 100 ms ends a
//! burst, `netem::BurstReset`) lets every one finish; `none` still gives
//! the plain chain for whoever asks for it.

use lab::{run, Scenario, Workload};
use netem::{BurstReset, LinkSpec, LossKind};

/// 2 MB over the default path (100 Mbit/s, 30 ms) with bursts of 10
/// packets on average and a mean loss rate of 10%, both ways.
fn bursty(seed: u64) -> Scenario {
    Scenario {
        seed,
        workload: Workload::files(1, 2_000_000),
        link: LinkSpec {
            loss: Some(0.1),
            loss_model: LossKind::Gilbert,
            burst: 10.0,
            ..LinkSpec::default()
        },
        ..Scenario::default()
    }
}

#[test]
fn gilbert_bursts_of_10_complete_with_the_default_link() {
    let failed: Vec<String> = (1..=7)
        .filter_map(|seed| match run(&bursty(seed)) {
            Ok(r) => {
                assert_eq!(r.metrics.bytes, 2_000_000, "seed {seed}");
                None
            }
            Err(e) => Some(format!("seed {seed}: {e}")),
        })
        .collect();
    assert!(failed.is_empty(), "downloads failed: {failed:#?}");
}

#[test]
fn burst_reset_none_is_the_plain_chain() {
    // Seed 2 is one the plain chain kills (a tail burst until the idle
    // timeout): `none` must still mean exactly that model.
    let mut s = bursty(2);
    s.link.burst_reset = BurstReset::None;
    let err = run(&s).expect_err("the plain chain loses this transfer");
    assert!(err.to_string().contains("idle timeout"), "{err}");
}
