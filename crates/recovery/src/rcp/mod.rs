//! RCP (`rcp.md`, Wang and Abouzeid): per timed-out message, a Double DQN
//! decides whether to retransmit or give up, maximising an application
//! utility of delivery and latency; and the paper's baselines.
//!
//! [`model`] holds the paper's formulas (utility and normalisations,
//! estimators, timeout, rewards, state); [`policy`] drives them through
//! the transport's seam. This module parses the schemes' names:
//!
//! `rcp`, `udp`, `arq` take options after a colon, comma separated:
//! `alpha=A` (default 2), `beta=B` (default 0.5), `norm=simple|tuned|asrun`
//! (default simple), for `simple` `tau_max=MS` (default 1000), for `tuned`
//! (eqs. 11-12 as printed) and `asrun` (the authors' `calcUtility`, which
//! Tables IV and VI were computed with: [`model::Normalisation`])
//! `eps_udp=P,eps_arq=P,l_udp=MS,l_arq=MS` (all four required: they need
//! UDP's and ARQ's measured loss and latency on the same network),
//! `initial_rto=MS` (default 30, Table V's 30 slots), `slot=MS` (default
//! 1), `rto=rfc6298|eq9` (default rfc6298: how eq. 9 updates the
//! deviation, [`model::RtoRule`]) and `align=slot` (retransmissions leave
//! at slot boundaries, as the authors' slotted senders act; default: at
//! their timeout). `tcp` takes none. `udp` and `arq` never
//! use the utility to decide; they take it so that every run reports the
//! same `utility` metric.

pub mod model;
pub mod policy;

use wire::time::Duration;

use self::model::{Normalisation, RtoRule, Utility};
use self::policy::{table3_dqn, LatencySource, MessageConfig, Rule};

/// The form of the options, for errors and `--help`.
pub const FORM: &str = "rcp|udp|arq[:alpha=A,beta=B,norm=simple,tau_max=MS | norm=tuned|asrun,eps_udp=P,eps_arq=P,l_udp=MS,l_arq=MS,initial_rto=MS,slot=MS,rto=rfc6298|eq9,align=slot|none], or tcp";

/// Default utility exponent (rcp.md §V-B's α = 2).
pub const DEFAULT_ALPHA: f64 = 2.0;
/// Default weight of delivery.
pub const DEFAULT_BETA: f64 = 0.5;
/// Default τ_r,max of the simple normalisation (eq. 14).
pub const DEFAULT_TAU_MAX: Duration = Duration::from_millis(1000);
/// Default timeout before the first RTT sample (Table V: 30 slots of 1 ms).
pub const DEFAULT_INITIAL_RTO: Duration = Duration::from_millis(30);
/// Default slot (eq. 10's 1).
pub const DEFAULT_SLOT: Duration = Duration::from_millis(1);

/// The configuration of a message scheme name (`rcp:beta=0.3`), `None` if
/// `name` is not one of `rcp`, `udp`, `arq`, `tcp`; `Some(Err)` says what
/// is wrong with its options.
pub fn parse(name: &str) -> Option<Result<MessageConfig, String>> {
    let (base, param) = match name.split_once(':') {
        Some((b, p)) => (b, Some(p)),
        None => (name, None),
    };
    let rule = match base {
        "rcp" => Rule::Learned,
        "udp" => Rule::Never,
        "arq" => Rule::Always,
        "tcp" => Rule::Reliable,
        _ => return None,
    };
    Some(config(name, rule, param))
}

fn config(name: &str, rule: Rule, param: Option<&str>) -> Result<MessageConfig, String> {
    let mut alpha = DEFAULT_ALPHA;
    let mut beta = DEFAULT_BETA;
    let mut norm = "simple";
    let mut tau_max = None;
    let (mut eps_udp, mut eps_arq, mut l_udp, mut l_arq) = (None, None, None, None);
    let mut initial_rto = DEFAULT_INITIAL_RTO;
    let mut slot = DEFAULT_SLOT;
    let mut rto = RtoRule::default();
    let mut align = false;
    if let Some(p) = param {
        if rule == Rule::Reliable {
            return Err("tcp takes no options".into());
        }
        for opt in p.split(',') {
            let (k, v) = opt
                .split_once('=')
                .ok_or_else(|| format!("option '{opt}' is not KEY=VALUE"))?;
            let num = || -> Result<f64, String> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| format!("{k} = '{v}' is not a non-negative number"))
            };
            let ms = || -> Result<Duration, String> {
                let x = num()?;
                if x > 3_600_000.0 {
                    return Err(format!("{k} = {v} ms is more than an hour"));
                }
                Ok(Duration::from_secs_f64(x / 1e3))
            };
            match k {
                "alpha" => alpha = num()?,
                "beta" => beta = num()?,
                "norm" => {
                    norm = match v {
                        "simple" => "simple",
                        "tuned" => "tuned",
                        "asrun" => "asrun",
                        _ => return Err(format!("norm = '{v}' is not simple, tuned or asrun")),
                    }
                }
                "tau_max" => tau_max = Some(ms()?),
                "eps_udp" => eps_udp = Some(num()?),
                "eps_arq" => eps_arq = Some(num()?),
                "l_udp" => l_udp = Some(ms()?),
                "l_arq" => l_arq = Some(ms()?),
                "initial_rto" => initial_rto = ms()?,
                "slot" => slot = ms()?,
                "align" => {
                    align = match v {
                        "slot" => true,
                        "none" => false,
                        _ => return Err(format!("align = '{v}' is not slot or none")),
                    }
                }
                "rto" => {
                    rto = match v {
                        "rfc6298" => RtoRule::Rfc6298,
                        "eq9" => RtoRule::Printed,
                        _ => return Err(format!("rto = '{v}' is not rfc6298 or eq9")),
                    }
                }
                _ => return Err(format!("unknown option '{k}'")),
            }
        }
    }
    let normalisation = if norm == "tuned" || norm == "asrun" {
        if tau_max.is_some() {
            return Err("tau_max belongs to norm=simple".into());
        }
        match (eps_udp, eps_arq, l_udp, l_arq) {
            (Some(eps_udp), Some(eps_arq), Some(l_udp), Some(l_arq)) if norm == "tuned" => {
                Normalisation::Tuned {
                    eps_udp,
                    eps_arq,
                    l_udp,
                    l_arq,
                }
            }
            (Some(eps_udp), Some(eps_arq), Some(l_udp), Some(l_arq)) => Normalisation::AsRun {
                eps_udp,
                eps_arq,
                l_udp,
                l_arq,
            },
            _ => {
                return Err(format!(
                    "norm={norm} needs eps_udp, eps_arq, l_udp and l_arq"
                ))
            }
        }
    } else {
        if eps_udp.or(eps_arq).is_some() || l_udp.or(l_arq).is_some() {
            return Err("eps_udp, eps_arq, l_udp, l_arq belong to norm=tuned or norm=asrun".into());
        }
        Normalisation::Simple {
            tau_r_max: tau_max.unwrap_or(DEFAULT_TAU_MAX),
        }
    };
    let utility = Utility {
        beta,
        alpha,
        normalisation,
    };
    utility.validate()?;
    if initial_rto.is_zero() || slot.is_zero() {
        return Err("initial_rto and slot must be positive".into());
    }
    Ok(MessageConfig {
        name: name.to_string(),
        rule,
        utility,
        initial_rto,
        slot,
        rto,
        align_to_slot: align,
        latency: LatencySource::Estimated,
        dqn: table3_dqn(),
    })
}

#[cfg(test)]
mod tests;
