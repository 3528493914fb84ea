//! Link options shared by `artq link` and `artq sim` (DESIGN.md): both
//! directions unless prefixed `--up-` (client to server) or `--down-`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use lab::scenario::{DirSpec, LinkSpec};
use netem::LinkConfig;

/// Random loss process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LossKind {
    /// Independent losses with probability --loss (like mm-loss).
    #[default]
    Bernoulli,
    /// Gilbert-Elliott bursts: mean rate --loss, mean burst length --burst.
    Gilbert,
    /// Mean rate redrawn from N(--loss, --loss-std) every --loss-interval
    /// (ART journal Fig. 15).
    Varying,
}

/// Options describing the emulated path.
#[derive(Args, Debug, Clone)]
pub struct LinkArgs {
    /// Bottleneck rate in Mbit/s (both directions).
    #[arg(long, value_name = "MBPS")]
    pub bw: Option<f64>,
    /// Rate of the client-to-server direction, Mbit/s.
    #[arg(long, value_name = "MBPS")]
    pub up_bw: Option<f64>,
    /// Rate of the server-to-client direction, Mbit/s.
    #[arg(long, value_name = "MBPS")]
    pub down_bw: Option<f64>,
    /// Mahimahi trace file for both directions (overrides --bw).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Mahimahi trace of the client-to-server direction.
    #[arg(long, value_name = "FILE")]
    pub up_trace: Option<PathBuf>,
    /// Mahimahi trace of the server-to-client direction.
    #[arg(long, value_name = "FILE")]
    pub down_trace: Option<PathBuf>,
    /// Round-trip propagation delay in ms, split evenly over both directions.
    #[arg(long, default_value_t = 0.0, value_name = "MS")]
    pub rtt: f64,
    /// Random loss probability 0..1 (both directions).
    #[arg(long, value_name = "P")]
    pub loss: Option<f64>,
    /// Loss probability of the client-to-server direction.
    #[arg(long, value_name = "P")]
    pub up_loss: Option<f64>,
    /// Loss probability of the server-to-client direction.
    #[arg(long, value_name = "P")]
    pub down_loss: Option<f64>,
    /// Loss model.
    #[arg(long, value_enum, default_value_t = LossKind::Bernoulli)]
    pub loss_model: LossKind,
    /// Mean burst length in packets (gilbert).
    #[arg(long, default_value_t = 3.0, value_name = "PKTS")]
    pub burst: f64,
    /// Gilbert-Elliott idle reset in ms (gilbert): a packet arriving this
    /// long after the previous one redraws the chain's state, so a burst
    /// cannot outlast a silence (default: the plain per-packet chain, whose
    /// bursts can swallow backed-off PTO probes for seconds).
    #[arg(long, value_name = "MS")]
    pub burst_reset: Option<f64>,
    /// Standard deviation of the loss rate (varying).
    #[arg(long, default_value_t = 0.01)]
    pub loss_std: f64,
    /// Interval between loss-rate draws in ms (varying).
    #[arg(long, default_value_t = 1000.0, value_name = "MS")]
    pub loss_interval: f64,
    /// Replay a recorded loss pattern (one 0/1 per line, 1 = drop) on the
    /// server-to-client direction instead of a random model.
    #[arg(long, value_name = "FILE")]
    pub loss_pattern: Option<PathBuf>,
    /// Drop-tail queue limit in packets (default: unlimited).
    #[arg(long, value_name = "PKTS")]
    pub queue: Option<u64>,
    /// Drop-tail queue limit in bytes (instead of --queue).
    #[arg(long, value_name = "BYTES", conflicts_with = "queue")]
    pub queue_bytes: Option<u64>,
}

impl LinkArgs {
    /// The options as the lab's link description, which both `artq link`
    /// and `artq sim` turn into link models (one implementation of the
    /// rules: trace over rate, direction overrides, loss models, queues).
    pub fn spec(&self) -> LinkSpec {
        LinkSpec {
            bw: self.bw,
            trace: self.trace.clone(),
            rtt: self.rtt,
            loss: self.loss,
            loss_model: match self.loss_model {
                LossKind::Bernoulli => lab::scenario::LossKind::Bernoulli,
                LossKind::Gilbert => lab::scenario::LossKind::Gilbert,
                LossKind::Varying => lab::scenario::LossKind::Varying,
            },
            burst: self.burst,
            burst_reset: self.burst_reset,
            loss_std: self.loss_std,
            loss_interval: self.loss_interval,
            loss_pattern: self.loss_pattern.clone(),
            queue: self.queue,
            queue_bytes: self.queue_bytes,
            up: DirSpec {
                bw: self.up_bw,
                trace: self.up_trace.clone(),
                loss: self.up_loss,
            },
            down: DirSpec {
                bw: self.down_bw,
                trace: self.down_trace.clone(),
                loss: self.down_loss,
            },
        }
    }

    /// The (client-to-server, server-to-client) link configurations.
    pub fn configs(&self) -> Result<(LinkConfig, LinkConfig)> {
        Ok(self.spec().configs()?)
    }
}
