//! Link options shared by `artq link` and `artq sim` (DESIGN.md): both
//! directions unless prefixed `--up-` (client to server) or `--down-`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use netem::{Capacity, LinkConfig, LossModel, QueueLimit, Trace};
use wire::time::Duration;

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
    fn capacity(&self, bw: Option<f64>, trace: &Option<PathBuf>) -> Result<Capacity> {
        if let Some(path) = trace.as_ref().or(self.trace.as_ref()) {
            let t = Trace::from_file(path)?;
            return Ok(Capacity::Trace(Arc::new(t)));
        }
        match bw.or(self.bw) {
            None => Ok(Capacity::Unlimited),
            Some(mbps) => {
                if !(mbps.is_finite() && mbps > 0.0 && mbps <= 1e6) {
                    bail!("bandwidth {mbps} Mbit/s is out of range (0 < bw <= 1e6)");
                }
                Ok(Capacity::Constant { bits_per_sec: (mbps * 1e6).round() as u64 })
            }
        }
    }

    fn loss(&self, p: Option<f64>, replay: bool) -> Result<LossModel> {
        if replay {
            if let Some(path) = &self.loss_pattern {
                return Ok(LossModel::replay_from_file(path)?);
            }
        }
        let Some(p) = p.or(self.loss) else { return Ok(LossModel::None) };
        if !(0.0..=1.0).contains(&p) {
            bail!("loss probability {p} is not in 0..1");
        }
        let model = match self.loss_model {
            LossKind::Bernoulli => LossModel::Bernoulli { p },
            LossKind::Gilbert => {
                if p >= 1.0 {
                    bail!("gilbert loss needs --loss below 1");
                }
                LossModel::gilbert_from_mean(p, self.burst)
            }
            LossKind::Varying => {
                if !(self.loss_interval.is_finite() && self.loss_interval > 0.0) {
                    bail!("--loss-interval must be positive");
                }
                LossModel::Varying {
                    mean: p,
                    std_dev: self.loss_std,
                    interval: Duration::from_secs_f64(self.loss_interval / 1e3),
                }
            }
        };
        model.validate().map_err(anyhow::Error::msg).context("invalid loss model")?;
        Ok(model)
    }

    fn queue(&self) -> QueueLimit {
        match (self.queue, self.queue_bytes) {
            (Some(p), _) => QueueLimit::Packets(p),
            (None, Some(b)) => QueueLimit::Bytes(b),
            (None, None) => QueueLimit::Unlimited,
        }
    }

    fn one_way_delay(&self) -> Result<Duration> {
        if !(self.rtt.is_finite() && self.rtt >= 0.0 && self.rtt <= 1e7) {
            bail!("--rtt {} ms is out of range", self.rtt);
        }
        Ok(Duration::from_secs_f64(self.rtt / 2e3))
    }

    /// The (client-to-server, server-to-client) link configurations.
    pub fn configs(&self) -> Result<(LinkConfig, LinkConfig)> {
        let delay = self.one_way_delay()?;
        let up = LinkConfig {
            capacity: self.capacity(self.up_bw, &self.up_trace)?,
            delay,
            queue: self.queue(),
            loss: self.loss(self.up_loss, false)?,
        };
        let down = LinkConfig {
            capacity: self.capacity(self.down_bw, &self.down_trace)?,
            delay,
            queue: self.queue(),
            loss: self.loss(self.down_loss, true)?,
        };
        up.validate().map_err(anyhow::Error::msg).context("invalid client-to-server link")?;
        down.validate().map_err(anyhow::Error::msg).context("invalid server-to-client link")?;
        Ok((up, down))
    }
}
