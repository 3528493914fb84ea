//! artq-recovery: the papers' sender-side loss recovery schemes as policies
//! behind the transport's [`RecoveryPolicy`](transport::policy::RecoveryPolicy)
//! seam, and a registry from the command-line names of DESIGN.md to
//! factories.
//!
//! What this crate is: the *decisions* of each scheme (how many replicas of
//! lost data to send in each retransmission round, and when to send each),
//! written as small state machines fed by the transport's callbacks. What it
//! is not: it owns no packets, reads no clock and no OS randomness. Time comes
//! in as `now`, randomness from the seeded RNG the transport hands to
//! [`RecoveryPolicy::on_data_lost`](transport::policy::RecoveryPolicy::on_data_lost),
//! so a run is repeatable bit for bit.
//!
//! Layers, from the bottom:
//! - [`fixed`] and [`rounds`]: the rule-based baselines of ART journal §7.1
//!   (`fixed:R`, `2n+1`, `or3`); plain QUIC is the transport's own
//!   [`QuicPolicy`](transport::policy::QuicPolicy).
//! - [`art`]: ART's Redundancy Adapter (journal §6.1), Replica Scheduler
//!   (§6.2), bandit adapters (Appendix A.1) and the DQN adapter
//!   (Appendix A.2, on crate `learn`), combined by
//!   [`art::ArtPolicy`] under one typed [`art::ArtConfig`].
//! - [`artplus`]: `art+`, our own policy beyond the papers: head-of-line
//!   awareness, a model-based level, burst awareness and a cost budget.
//! - [`fec`]: the block-FEC baseline (`fec:K`), the one scheme that needs
//!   an artq receiver.
//! - [`rcp`]: RCP's retransmit-or-drop decisions for messages (Double
//!   DQN) and its baselines `udp`, `arq`, `tcp`.
//! - [`autorec`]: AutoRec (autorec.md §4): ARQ plus reinjection of
//!   retransmitted, unacknowledged data in off-mode and opportunistically,
//!   with its Redundancy Adapter.
//! - [`steer`]: the same decisions taken outside the transport (the
//!   Python environment), by deferring them to a driver.
//! - [`registry`]: scheme names (`art-fix:3`) to factories, with strict
//!   parsing and helpful errors.
//!
//! `docs/recovery.md` describes each scheme, its parameters and every choice
//! made where the papers are vague.
#![warn(missing_docs)]

pub mod art;
pub mod artplus;
pub mod autorec;
pub mod desk;
pub mod error;
pub mod fec;
pub mod fixed;
pub mod rcp;
pub mod registry;
pub mod rounds;
pub mod steer;
mod whole;

pub use art::{ArtConfig, ArtFactory, ArtPolicy, BanditConfig, BanditStrategy};
pub use autorec::{AutorecConfig, AutorecPolicy};
pub use fec::FecPolicy;
pub use fixed::FixedPolicy;
pub use registry::{
    parse_art_dqn, parse_scheme, parse_scheme_measuring, Scheme, SchemeError, SchemeRow, SCHEMES,
};
pub use rounds::{RoundRule, RoundsPolicy};
