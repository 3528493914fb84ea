//! The messages workload: fixed-size messages at a fixed rate, each of
//! which may be abandoned (RCP, rcp.md §III-A), in DATAGRAM frames
//! ([`crate::messages`]).

use super::{ClientReport, Workload, WorkloadKind, WorkloadOptions};
use crate::app::{App, Host};
use crate::files::{ClientError, FileTimes};
use crate::messages::{MessageParams, MessageReceiver, MessageSender, DEFAULT_DRAIN};
use crate::protocol::Protocol;

/// The messages workload's message size when `message_size` is not given,
/// bytes: a small real-time update (a game's avatar position, rcp.md §I).
pub const DEFAULT_MESSAGE_SIZE: u32 = 100;

/// The messages workload's rate when `message_rate` is not given, per
/// second: one message per 1 ms slot (rcp.md Table I, "1 pkt/slot").
pub const DEFAULT_MESSAGE_RATE: u64 = 1000;

/// The workload of the keys `messages` (required), `message_size`
/// (default [`DEFAULT_MESSAGE_SIZE`]), `message_rate` (default
/// [`DEFAULT_MESSAGE_RATE`]) and `drain` (default [`DEFAULT_DRAIN`]).
pub(super) fn parse(o: &WorkloadOptions) -> Result<Workload, String> {
    Ok(Workload::Messages(MessageParams {
        messages: o
            .messages
            .ok_or("the messages workload needs `messages` (how many)")?,
        size: o.message_size.unwrap_or(DEFAULT_MESSAGE_SIZE),
        rate: o.message_rate.unwrap_or(DEFAULT_MESSAGE_RATE),
        drain_ms: o.drain.unwrap_or(DEFAULT_DRAIN.as_millis() as u32),
    }))
}

impl WorkloadKind for MessageParams {
    fn name(&self) -> &'static str {
        "messages"
    }

    /// One message session; its messages are counted apart.
    fn items(&self) -> u64 {
        1
    }

    /// Unknown in advance: a message may be abandoned.
    fn total_bytes(&self) -> u64 {
        0
    }

    fn message_params(&self) -> Option<MessageParams> {
        Some(*self)
    }

    fn validate(&self) -> Result<(), String> {
        MessageParams::validate(self)
    }

    fn server_app(&self, content_seed: u64) -> Box<dyn App> {
        Box::new(MessageSender::new(*self, content_seed))
    }

    fn client_app(&self, _content_seed: u64, _protocol: Protocol) -> Result<Box<dyn App>, String> {
        Ok(Box::new(MessageReceiver::new(*self)))
    }

    /// The session is one item, from the connection to the sender's close;
    /// the bytes are the delivered messages' sizes.
    fn client_report(&self, host: &Host) -> Option<ClientReport> {
        host.app::<MessageReceiver>().map(|c| {
            let r = c.report();
            ClientReport {
                items: match (r.connected_at, r.done_at) {
                    (Some(requested), Some(completed)) => vec![FileTimes {
                        requested,
                        completed,
                    }],
                    _ => Vec::new(),
                },
                bytes_received: r.delivered * u64::from(self.size),
                done_at: r.done_at,
                error: r.error.clone().map(ClientError::Connection),
                playback: None,
                messages: Some(r.clone()),
            }
        })
    }

    fn options(&self) -> WorkloadOptions {
        WorkloadOptions {
            messages: Some(self.messages),
            message_size: Some(self.size),
            message_rate: Some(self.rate),
            drain: Some(self.drain_ms),
            ..WorkloadOptions::default()
        }
    }
}
