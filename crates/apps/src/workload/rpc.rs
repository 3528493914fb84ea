//! The rpc workload: open-loop request/response calls over one
//! connection (ART journal §7.7, Fig. 26); sizes and schedule in
//! [`crate::rpc`].

use super::{ClientReport, Workload, WorkloadKind, WorkloadOptions, MAX_FILES};
use crate::app::{App, Host};
use crate::protocol::Protocol;
use crate::rpc::{RpcClient, MAX_RATE};
use crate::server::{HttpServer, ServerOptions};

/// The rpc workload's call rate when `rpc_rate` is not given, per second
/// (the request rate of ART journal §7.7's deployment clients).
pub const DEFAULT_RPC_RATE: u64 = 100;

/// The rpc workload's calls ([`Workload::Rpc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcWorkload {
    /// Number of calls (at least 1).
    pub rpcs: u64,
    /// Calls per second (1..=[`MAX_RATE`]).
    pub rate: u64,
}

/// The workload of the keys `rpcs` (required) and `rpc_rate` (default
/// [`DEFAULT_RPC_RATE`]).
pub(super) fn parse(o: &WorkloadOptions) -> Result<Workload, String> {
    Ok(Workload::Rpc(RpcWorkload {
        rpcs: o
            .rpcs
            .ok_or("the rpc workload needs `rpcs` (number of calls)")?,
        rate: o.rpc_rate.unwrap_or(DEFAULT_RPC_RATE),
    }))
}

impl WorkloadKind for RpcWorkload {
    fn name(&self) -> &'static str {
        "rpc"
    }

    fn items(&self) -> u64 {
        self.rpcs
    }

    /// Unknown in advance: sizes are drawn from the seed.
    fn total_bytes(&self) -> u64 {
        0
    }

    fn items_are_calls(&self) -> bool {
        true
    }

    /// 1..=[`MAX_FILES`] calls at 1..=[`MAX_RATE`] per second.
    fn validate(&self) -> Result<(), String> {
        if self.rpcs == 0 || self.rpcs > MAX_FILES {
            return Err(format!("the rpc workload needs 1..={MAX_FILES} calls"));
        }
        if self.rate == 0 || self.rate > MAX_RATE {
            return Err(format!(
                "rpc_rate must be in 1..={MAX_RATE} calls per second"
            ));
        }
        Ok(())
    }

    fn server_app(&self, content_seed: u64) -> Box<dyn App> {
        Box::new(HttpServer::new(
            Box::new(crate::rpc::rpc_content(content_seed)),
            ServerOptions::default(),
        ))
    }

    fn client_app(&self, content_seed: u64, protocol: Protocol) -> Result<Box<dyn App>, String> {
        Ok(Box::new(RpcClient::new(
            protocol,
            Some("localhost".into()),
            content_seed,
            self.rpcs,
            self.rate,
        )))
    }

    fn client_report(&self, host: &Host) -> Option<ClientReport> {
        host.app::<RpcClient>().map(|c| {
            let r = c.report();
            ClientReport {
                items: r.calls.clone(),
                bytes_received: r.bytes_received,
                done_at: r.done_at,
                error: r.error.clone(),
                playback: None,
                messages: None,
            }
        })
    }

    fn options(&self) -> WorkloadOptions {
        WorkloadOptions {
            rpcs: Some(self.rpcs),
            rpc_rate: Some(self.rate),
            ..WorkloadOptions::default()
        }
    }
}
