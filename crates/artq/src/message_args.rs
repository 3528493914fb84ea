//! The message workload's flags (`--messages`, `--message-size`,
//! `--message-rate`, `--drain`), one definition for `artq sim`, `artq
//! train`, `artq serve` and `artq get`: the simulated workload and the real
//! sender and receiver take the same numbers, with the same defaults
//! (`apps::workload`) and the same checks (`Workload::try_from`).

use anyhow::{bail, Result};
use apps::messages::MessageParams;
use apps::workload::{Workload, WorkloadOptions};
use clap::Args;

/// `--messages` default when the messages workload is chosen without it.
pub const DEFAULT_MESSAGES: u64 = 10_000;

/// The message workload's flags.
#[derive(Args, Debug, Clone, Default)]
pub struct MessageArgs {
    /// messages: number of messages [default: 10000].
    #[arg(long, value_name = "N")]
    pub messages: Option<u64>,
    /// messages: bytes per message [default: 100].
    #[arg(long, value_name = "BYTES")]
    pub message_size: Option<u32>,
    /// messages: messages per second [default: 1000].
    #[arg(long, value_name = "PER_S")]
    pub message_rate: Option<u64>,
    /// messages: ms after the last message before the sender closes; a
    /// message not arrived by then is lost [default: 3000].
    #[arg(long, value_name = "MS")]
    pub drain: Option<u32>,
}

impl MessageArgs {
    /// Whether any of the flags was given.
    pub fn any(&self) -> bool {
        self.messages.is_some()
            || self.message_size.is_some()
            || self.message_rate.is_some()
            || self.drain.is_some()
    }

    /// The flags into a workload's options, `messages` defaulting to
    /// [`DEFAULT_MESSAGES`] when `chosen` (the messages workload was asked
    /// for) and absent.
    pub fn options(&self, chosen: bool, options: &mut WorkloadOptions) {
        options.messages = self.messages.or(chosen.then_some(DEFAULT_MESSAGES));
        options.message_size = self.message_size;
        options.message_rate = self.message_rate;
        options.drain = self.drain;
    }

    /// For `artq serve` and `artq get`: the message workload when
    /// `--messages` is given (`None` without any flag; an error for
    /// `--message-size`, `--message-rate` or `--drain` alone).
    pub fn params(&self) -> Result<Option<MessageParams>> {
        if self.messages.is_none() {
            if self.any() {
                bail!("--message-size, --message-rate and --drain need --messages N");
            }
            return Ok(None);
        }
        let mut options = WorkloadOptions {
            kind: Some("messages".into()),
            ..WorkloadOptions::default()
        };
        self.options(true, &mut options);
        match Workload::try_from(options) {
            Ok(Workload::Messages(params)) => Ok(Some(params)),
            Ok(other) => bail!("--messages built a {} workload", other.name()),
            Err(e) => bail!("--messages: {e}"),
        }
    }
}
