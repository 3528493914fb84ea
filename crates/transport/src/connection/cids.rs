//! Connection IDs (RFC 9000 §5.1): the ones we issue to the peer and the
//! ones the peer issued to us, and the authentication of the ones the
//! handshake used (RFC 9000 §7.3).
//!
//! Every connection ID and stateless reset token we issue is drawn from the
//! connection's generator ([`crate::rng::StackRng`]): unpredictable when the
//! endpoint was seeded from the OS, reproducible under a fixed seed.

use std::collections::{BTreeMap, VecDeque};

use rand::RngCore;
use wire::cid::ConnectionId;
use wire::time::Instant;
use wire::transport_params::TransportParameters;
use wire::TransportErrorCode;

use super::{Connection, EndpointEvent};
use crate::error::TransportError;

/// A connection ID we issued, waiting to be announced or announced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IssuedCid {
    pub cid: ConnectionId,
    pub reset_token: [u8; 16],
}

/// Both directions of connection ID bookkeeping.
#[derive(Debug)]
pub(crate) struct CidState {
    /// Ours, by sequence number (0 = the handshake CID).
    local: BTreeMap<u64, IssuedCid>,
    next_local_seq: u64,
    /// NEW_CONNECTION_ID frames to send (sequence numbers).
    pub pending_new: VecDeque<u64>,
    /// Peer's `active_connection_id_limit`.
    peer_limit: u64,
    /// Peer-issued, by sequence number; the active one is the lowest.
    remote: BTreeMap<u64, ConnectionId>,
    remote_retire_prior_to: u64,
    /// RETIRE_CONNECTION_ID frames to send.
    pub pending_retire: VecDeque<u64>,
    /// New local CIDs the endpoint must learn about, by sequence number.
    new_local: VecDeque<(u64, IssuedCid)>,
    /// How many peer CIDs we accept at once (our active_connection_id_limit).
    local_limit: u64,
}

impl CidState {
    pub fn new(local_cid: ConnectionId, remote_cid: ConnectionId) -> Self {
        let mut local = BTreeMap::new();
        local.insert(
            0,
            IssuedCid {
                cid: local_cid,
                reset_token: [0; 16],
            },
        );
        let mut remote = BTreeMap::new();
        remote.insert(0, remote_cid);
        CidState {
            local,
            next_local_seq: 1,
            pending_new: VecDeque::new(),
            peer_limit: 2,
            remote,
            remote_retire_prior_to: 0,
            pending_retire: VecDeque::new(),
            new_local: VecDeque::new(),
            local_limit: 4,
        }
    }

    pub fn set_local_limit(&mut self, limit: u64) {
        self.local_limit = limit.max(2);
    }

    pub fn local_cid_len(&self) -> usize {
        self.local.values().next().map_or(0, |c| c.cid.len())
    }

    /// The CID we put in our packets' destination field.
    pub fn remote_cid(&self) -> ConnectionId {
        self.remote.values().next().copied().unwrap_or_default()
    }

    /// Client: adopt the server's chosen CID (RFC 9000 §7.2).
    pub fn set_remote_cid(&mut self, cid: ConnectionId) {
        self.remote.clear();
        self.remote.insert(0, cid);
    }

    pub fn set_peer_limit(&mut self, limit: u64) {
        self.peer_limit = limit;
    }

    pub fn issued(&self, seq: u64) -> Option<IssuedCid> {
        self.local.get(&seq).copied()
    }

    /// Issue CIDs until the peer holds min(its limit, 4) (RFC 9000 §5.1.1).
    pub fn issue(&mut self, rng: &mut dyn RngCore, len: usize) {
        let target = self.peer_limit.min(4);
        while (self.local.len() as u64) < target {
            let mut bytes = [0u8; ConnectionId::MAX_LEN];
            rng.fill_bytes(&mut bytes[..len]);
            let Ok(cid) = ConnectionId::new(&bytes[..len]) else {
                return;
            };
            let mut reset_token = [0u8; 16];
            rng.fill_bytes(&mut reset_token);
            let seq = self.next_local_seq;
            self.next_local_seq += 1;
            let issued = IssuedCid { cid, reset_token };
            self.local.insert(seq, issued);
            self.pending_new.push_back(seq);
            self.new_local.push_back((seq, issued));
        }
    }

    pub fn on_new_connection_id(
        &mut self,
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        _reset_token: [u8; 16],
    ) -> Result<(), TransportError> {
        if let Some(existing) = self.remote.get(&seq) {
            if *existing != cid {
                return Err(TransportError::protocol_violation(
                    "NEW_CONNECTION_ID reuses a sequence number",
                ));
            }
            return Ok(());
        }
        if seq >= self.remote_retire_prior_to {
            self.remote.insert(seq, cid);
        } else {
            // Already retired by an earlier retire_prior_to: retire it at once.
            self.pending_retire.push_back(seq);
        }
        if retire_prior_to > self.remote_retire_prior_to {
            self.remote_retire_prior_to = retire_prior_to;
            let retired: Vec<u64> = self
                .remote
                .range(..retire_prior_to)
                .map(|(s, _)| *s)
                .collect();
            for s in retired {
                self.remote.remove(&s);
                self.pending_retire.push_back(s);
            }
        }
        if self.remote.len() as u64 > self.local_limit {
            return Err(TransportError::new(
                TransportErrorCode::CONNECTION_ID_LIMIT_ERROR,
                "too many connection IDs",
            ));
        }
        if self.pending_retire.len() > 64 {
            return Err(TransportError::new(
                TransportErrorCode::CONNECTION_ID_LIMIT_ERROR,
                "too many connection IDs retired at once",
            ));
        }
        Ok(())
    }

    /// The peer retired one of ours; returns the CID to stop routing.
    pub fn on_retire_connection_id(
        &mut self,
        seq: u64,
        rng: &mut dyn RngCore,
    ) -> Result<Option<ConnectionId>, TransportError> {
        if seq >= self.next_local_seq {
            return Err(TransportError::protocol_violation(
                "RETIRE_CONNECTION_ID for a CID never issued",
            ));
        }
        let len = self.local_cid_len();
        let retired = self.local.remove(&seq).map(|c| c.cid);
        if retired.is_some() {
            self.issue(rng, len);
        }
        Ok(retired)
    }

    /// Server: the preferred address's connection ID, sequence number 1
    /// (RFC 9000 §5.1.1), announced in the transport parameters rather
    /// than a NEW_CONNECTION_ID frame. Only before any other was issued.
    pub fn add_preferred(&mut self, cid: ConnectionId, reset_token: [u8; 16]) {
        if self.next_local_seq != 1 {
            return;
        }
        let issued = IssuedCid { cid, reset_token };
        self.local.insert(1, issued);
        self.next_local_seq = 2;
        self.new_local.push_back((1, issued));
    }

    /// The peer's connection ID of sequence number `seq`, if we hold it.
    pub fn remote_cid_by_seq(&self, seq: u64) -> Option<ConnectionId> {
        self.remote.get(&seq).copied()
    }

    /// Send to the peer's connection ID `seq` from now on (it becomes the
    /// lowest we hold) and retire the ones below it (RFC 9000 §5.1.2): a
    /// client moving to the preferred address. Nothing happens unless we
    /// hold `seq`.
    pub fn use_from(&mut self, seq: u64) {
        if !self.remote.contains_key(&seq) {
            return;
        }
        let below: Vec<u64> = self.remote.range(..seq).map(|(s, _)| *s).collect();
        for s in below {
            self.remote.remove(&s);
            self.pending_retire.push_back(s);
        }
    }

    pub fn take_new_local(&mut self) -> Option<(u64, IssuedCid)> {
        self.new_local.pop_front()
    }
}

impl Connection {
    /// RFC 9000 §7.3: the peer's transport parameters must name the
    /// connection IDs the handshake actually used, which authenticates them
    /// (the Initial packets that carried them are not). A client also checks
    /// what the server says about its first Destination Connection ID and
    /// about a Retry: present with the Retry's Source Connection ID after
    /// one, absent otherwise.
    pub(super) fn authenticate_cids(
        &self,
        params: &TransportParameters,
    ) -> Result<(), TransportError> {
        let tp_err = |r| TransportError::new(TransportErrorCode::TRANSPORT_PARAMETER_ERROR, r);
        if params.initial_source_connection_id != Some(self.cids.remote_cid()) {
            return Err(tp_err("initial_source_connection_id mismatch"));
        }
        if self.side.is_client() {
            if params.original_destination_connection_id != Some(self.original_dcid) {
                return Err(tp_err("original_destination_connection_id mismatch"));
            }
            match (self.retry_scid, params.retry_source_connection_id) {
                (None, Some(_)) => return Err(tp_err("retry_source_connection_id without Retry")),
                (Some(_), None) => {
                    return Err(tp_err("retry_source_connection_id missing after Retry"))
                }
                (Some(ours), Some(theirs)) if ours != theirs => {
                    return Err(tp_err("retry_source_connection_id mismatch"))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Hand the peer spare connection IDs once the handshake is confirmed.
    pub(super) fn issue_cids(&mut self, now: Instant) {
        let len = self.cids.local_cid_len();
        if len == 0 {
            return;
        }
        self.cids.issue(&mut self.rng, len);
        self.drain_cid_events(now);
    }

    /// Tell the endpoint (routing) and the subscribers (traces) about the
    /// connection IDs just issued.
    pub(super) fn drain_cid_events(&mut self, now: Instant) {
        while let Some((seq, issued)) = self.cids.take_new_local() {
            for s in &mut self.subscribers {
                s.connection_id_issued(now, seq, &issued.cid, &issued.reset_token);
            }
            self.endpoint_events
                .push_back(EndpointEvent::NewLocalCid(issued.cid));
        }
    }
}
