//! artq-lab: the real transport inside the network simulator, and the
//! papers' metrics.
//!
//! What it is: the glue that runs two real `transport` endpoints with a
//! workload's server and client applications (`apps`, the same code as
//! `artq serve` and `artq get`; the server's sender uses one recovery
//! scheme) inside `netem`'s deterministic discrete-event simulator, over
//! emulated links, and measures DESIGN.md's metrics where the papers
//! measure them. A
//! [`Scenario`] plus its seed fully determines a run; [`run()`](fn@run) turns it into
//! a [`RunResult`] whose [`RunMetrics`] is `artq sim --json`'s object.
//!
//! What it is not: a protocol implementation (that is `transport`), an
//! application (that is `apps`), a link model (that is `netem`), or a
//! command-line program (that is `artq`).
//!
//! Layers, bottom up:
//! - [`node`]: [`QuicNode`], an `apps::Host` (endpoint plus application)
//!   as a simulator node, and the observers that measure at both ends;
//! - [`metrics`]: the subscribers that record at both ends, and the
//!   aggregation into [`RunMetrics`];
//! - [`scenario`]: [`Scenario`] (TOML) and [`ScenarioError`];
//! - [`run`](mod@run): one scenario through the simulator;
//! - [`steer`]: one scenario paused at each decision of one kind and
//!   steered from outside (the Python environment);
//! - [`train`]: ART-DQN's learner trained over simulated episodes, of one
//!   scenario or drawn from a distribution (`artq train`);
//! - [`experiments`]: the ART paper's evaluation as named, seeded
//!   experiments, aggregated and judged against the paper (`artq reproduce`).
#![warn(missing_docs)]

pub mod experiments;
pub mod metrics;
pub mod node;
pub mod run;
pub mod scenario;
pub mod steer;
pub mod train;

pub use apps::workload::Workload;
pub use metrics::{ItemRecord, RunMetrics, Summary};
pub use netem::LinkSpec;
pub use node::QuicNode;
pub use run::{run, run_with, Progress, QlogSinks, RunOptions, RunResult};
pub use scenario::{FlowSpec, Scenario, ScenarioError};
