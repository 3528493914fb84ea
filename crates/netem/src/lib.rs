//! artq-netem: the network emulator.
//!
//! Link models shared verbatim by a deterministic discrete-event simulator
//! and a real-time UDP relay. It knows nothing about QUIC: a node is anything
//! that consumes and produces UDP datagrams.
//!
//! Layers, bottom up:
//!
//! - [`seed`]: one master seed per scenario, an independent sub-seed per
//!   component (`derive_seed(master, "link/up")`, `"link/down"`, ...).
//! - [`trace`]: Mahimahi delivery-opportunity traces (files or generated
//!   constant rates), with errors naming file and line.
//! - [`loss`]: random loss models (Bernoulli, Gilbert-Elliott, Gaussian
//!   varying rate, recorded patterns) and the seeded process applying one.
//! - [`faults`]: the interop runner's faults: blackhole windows, drop lists,
//!   corruption.
//! - [`link`]: one link direction: faults, loss, drop-tail queue, capacity
//!   (trace, constant, the RCP authors' slotted delay line, or unlimited),
//!   propagation delay, corruption. Sans-IO: time is an argument.
//! - [`sim`]: the discrete-event simulator: nodes, links, routes, an
//!   event heap keyed by `(time, seq)`; single-threaded, no sleeping.
//! - [`spec`]: [`LinkSpec`], the path as users describe it (flags, TOML),
//!   and its translation into the two directions' [`LinkConfig`]s.
//! - [`relay`]: the only code with sockets and a real clock: relays UDP
//!   both ways through two links in real time (`artq link`), optionally
//!   recording the server's side of the link ([`pcap`]).
//! - [`pcap`]: a minimal pcap writer for the relay's capture.
//!
//! Everything below the relay is deterministic: the same configuration, seed
//! and arrival times give the same result, bit for bit.
//!
//! # Seeds
//!
//! A scenario has one master seed. Each random component gets its own stream,
//! `derive_seed(master, label)`: the client-to-server link uses
//! `derive_seed(master, "link/up")`, the server-to-client link
//! `derive_seed(master, "link/down")`, other links and endpoints labels of
//! their own (`"link/bottleneck"`, `"endpoint/client"`, ...). Inside a link,
//! the loss process draws from `derive_seed(link_seed, "loss")`, corruption
//! from `derive_seed(link_seed, "corrupt")`. Adding a
//! component never shifts another's stream. The relay follows the same rule,
//! so a relay and a simulation with the same seed and the same arrival times
//! lose the same packets.
#![warn(missing_docs)]

pub mod faults;
pub mod link;
pub mod loss;
pub mod pcap;
pub mod relay;
pub mod seed;
pub mod sim;
pub mod spec;
pub mod trace;

pub use faults::{Blackholes, Corruption, DropList};
pub use link::{
    Capacity, Datagram, Ecn, Link, LinkConfig, LinkStats, QueueLimit, RateSchedule, SlotRates,
    Slotted,
};
pub use loss::{LossModel, LossProcess};
pub use relay::{ecn_from_udp, ecn_to_udp};
pub use relay::{RelayConfig, RelayHandle, RelayStats};
pub use seed::derive_seed;
pub use sim::{LinkId, Node, NodeId, RouteError, RunOutcome, SimStats, Simulator};
pub use spec::{BurstReset, LinkSpec, LossKind, SpecError};
pub use trace::{read_capped, read_capped_text, Trace, TraceError};
