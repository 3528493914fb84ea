//! Connection IDs (RFC 9000 §5.1): the ones we issue to the peer and the
//! ones the peer issued to us, and the authentication of the ones the
//! handshake used (RFC 9000 §7.3).
//!
//! Every connection ID and stateless reset token we issue is drawn by the
//! endpoint's [`CidIssuer`] from the connection's generator
//! ([`crate::rng::StackRng`]): unpredictable when the endpoint was seeded
//! from the OS, reproducible under a fixed seed; shaped for the worker and
//! with tokens from the static reset key when the endpoint has them.
//!
//! The peer's IDs are kept with the stateless reset token it gave for each
//! (NEW_CONNECTION_ID, and from a server the stateless_reset_token and
//! preferred_address transport parameters), so that a datagram we cannot
//! process can be recognised as a stateless reset (RFC 9000 §10.3.1).

use std::collections::{BTreeMap, VecDeque};

use rand::RngCore;
use wire::cid::ConnectionId;
use wire::time::Instant;
use wire::transport_params::TransportParameters;
use wire::TransportErrorCode;

use super::{Connection, EndpointEvent};
use crate::cid_issuer::{constant_time_eq, CidIssuer};
use crate::error::TransportError;

/// A connection ID we issued, waiting to be announced or announced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IssuedCid {
    pub cid: ConnectionId,
    pub reset_token: [u8; 16],
}

/// A connection ID the peer issued to us.
#[derive(Clone, Copy, Debug)]
struct RemoteCid {
    cid: ConnectionId,
    /// The stateless reset token the peer gave for it; `None` for the IDs
    /// that come without one (a client's, the server's handshake ID when
    /// it sent no stateless_reset_token parameter).
    reset_token: Option<[u8; 16]>,
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
    /// Bounded by `local_limit` (a peer exceeding it is closed).
    remote: BTreeMap<u64, RemoteCid>,
    /// Changes made to `remote` so far (every one goes through
    /// [`CidState::remote_mut`]): the endpoint reads the stateless reset
    /// tokens again only when this moved.
    remote_changes: u64,
    remote_retire_prior_to: u64,
    /// RETIRE_CONNECTION_ID frames to send.
    pub pending_retire: VecDeque<u64>,
    /// New local CIDs the endpoint must learn about, by sequence number.
    new_local: VecDeque<(u64, IssuedCid)>,
    /// How many peer CIDs we accept at once (our active_connection_id_limit).
    local_limit: u64,
}

impl CidState {
    /// `local_reset_token`: the handshake ID's token when one is sent (a
    /// server's stateless_reset_token parameter), else none.
    pub fn new(
        local_cid: ConnectionId,
        local_reset_token: Option<[u8; 16]>,
        remote_cid: ConnectionId,
    ) -> Self {
        let mut local = BTreeMap::new();
        local.insert(
            0,
            IssuedCid {
                cid: local_cid,
                reset_token: local_reset_token.unwrap_or_default(),
            },
        );
        let mut remote = BTreeMap::new();
        remote.insert(
            0,
            RemoteCid {
                cid: remote_cid,
                reset_token: None,
            },
        );
        CidState {
            local,
            next_local_seq: 1,
            pending_new: VecDeque::new(),
            peer_limit: 2,
            remote,
            remote_changes: 0,
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
        self.remote
            .values()
            .next()
            .map(|r| r.cid)
            .unwrap_or_default()
    }

    /// The peer's IDs, to change them (counted in `remote_changes`).
    fn remote_mut(&mut self) -> &mut BTreeMap<u64, RemoteCid> {
        self.remote_changes = self.remote_changes.wrapping_add(1);
        &mut self.remote
    }

    /// How many times the peer's IDs held here changed: equal counts mean
    /// the same IDs, and so the same [`CidState::used_reset_tokens`] for
    /// the same `also_used`.
    pub fn remote_changes(&self) -> u64 {
        self.remote_changes
    }

    /// Client: adopt the server's chosen CID (RFC 9000 §7.2).
    pub fn set_remote_cid(&mut self, cid: ConnectionId) {
        let remote = self.remote_mut();
        remote.clear();
        remote.insert(
            0,
            RemoteCid {
                cid,
                reset_token: None,
            },
        );
    }

    /// Client: the server's stateless_reset_token transport parameter,
    /// the token of its handshake ID (sequence number 0, RFC 9000 §18.2).
    pub fn set_handshake_reset_token(&mut self, token: [u8; 16]) {
        if let Some(r) = self.remote_mut().get_mut(&0) {
            r.reset_token = Some(token);
        }
    }

    /// The stateless reset tokens of the peer IDs we have used (RFC 9000
    /// §10.3.1): the active one's (the lowest held, which every packet goes
    /// to) and `also_used`'s (the preferred address's, once probed).
    /// Retired IDs are no longer held, and IDs never used are not counted,
    /// as the RFC requires.
    pub fn used_reset_tokens(&self, also_used: Option<u64>) -> [Option<[u8; 16]>; 2] {
        let mut held = self.remote.iter();
        let active = held.next();
        let other = also_used
            .filter(|seq| active.is_none_or(|(a, _)| a != seq))
            .and_then(|seq| self.remote.get(&seq));
        [
            active.and_then(|(_, r)| r.reset_token),
            other.and_then(|r| r.reset_token),
        ]
    }

    /// Whether `tail`, the last 16 bytes of a datagram we could not
    /// process, is one of [`CidState::used_reset_tokens`]. Every candidate
    /// is compared, each in constant time.
    pub fn is_stateless_reset(&self, tail: &[u8; 16], also_used: Option<u64>) -> bool {
        self.used_reset_tokens(also_used)
            .iter()
            .flatten()
            .fold(false, |found, t| found | constant_time_eq(t, tail))
    }

    pub fn set_peer_limit(&mut self, limit: u64) {
        self.peer_limit = limit;
    }

    pub fn issued(&self, seq: u64) -> Option<IssuedCid> {
        self.local.get(&seq).copied()
    }

    /// Issue CIDs of `len` bytes (1 to 20) until the peer holds min(its
    /// limit, 4) (RFC 9000 §5.1.1), each with its reset token, both drawn
    /// by `issuer`.
    pub fn issue(&mut self, issuer: &CidIssuer, rng: &mut dyn RngCore, len: usize) {
        let target = self.peer_limit.min(4);
        while (self.local.len() as u64) < target {
            let cid = issuer.new_cid_of_len(rng, len);
            let reset_token = issuer.reset_token(rng, &cid);
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
        reset_token: [u8; 16],
    ) -> Result<(), TransportError> {
        if let Some(existing) = self.remote.get(&seq) {
            if existing.cid != cid {
                return Err(TransportError::protocol_violation(
                    "NEW_CONNECTION_ID reuses a sequence number",
                ));
            }
            return Ok(());
        }
        if seq >= self.remote_retire_prior_to {
            let reset_token = Some(reset_token);
            self.remote_mut()
                .insert(seq, RemoteCid { cid, reset_token });
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
                self.remote_mut().remove(&s);
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
        issuer: &CidIssuer,
        rng: &mut dyn RngCore,
    ) -> Result<Option<ConnectionId>, TransportError> {
        if seq >= self.next_local_seq {
            return Err(TransportError::protocol_violation(
                "RETIRE_CONNECTION_ID for a CID never issued",
            ));
        }
        let len = self.local_cid_len();
        let retired = self.local.remove(&seq).map(|c| c.cid);
        if retired.is_some() && len > 0 {
            self.issue(issuer, rng, len);
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
        self.remote.get(&seq).map(|r| r.cid)
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
            self.remote_mut().remove(&s);
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
            match (
                self.validation.retry_scid(),
                params.retry_source_connection_id,
            ) {
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
        self.cids.issue(&self.cid_issuer, &mut self.rng, len);
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
