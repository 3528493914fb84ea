//! RCP (`rcp.md`, Wang and Abouzeid): per timed-out message, a Double DQN
//! decides whether to retransmit or give up, maximising an application
//! utility of delivery and latency.
//!
//! [`model`] holds the paper's formulas (utility and normalisations,
//! estimators, timeout, rewards, state); the policy that drives them
//! through the transport's seam builds on it.

pub mod model;
