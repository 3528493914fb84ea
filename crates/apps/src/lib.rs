//! artq-apps: the application layer, one for both drivers.
//!
//! An application is a server role and a client role over `transport`
//! connections, advanced by a driver with `now` and never reading a clock
//! itself. The same code runs inside the discrete-event simulator
//! (`lab`'s node) and over real UDP (`artq serve` / `artq get`), so a
//! workload written once gives the same bytes and the same metrics in both.
//!
//! Layers, bottom up:
//! - [`protocol`]: the protocols and their ALPN tokens (the only list of them);
//! - [`http`]: requests, responses and the session interfaces;
//! - [`hq`] and [`h3`]: hq-interop and HTTP/3 (with QPACK) sessions.
#![warn(missing_docs)]

pub mod app;
pub mod content;
pub mod edge;
pub mod files;
#[doc(hidden)]
pub mod fuzzing;
pub mod h3;
pub mod hq;
pub mod http;
pub mod messages;
pub mod protocol;
pub mod rpc;
pub mod server;
pub mod size;
pub mod video;
pub mod workload;

pub use app::{App, Host, Observer};
pub use protocol::Protocol;
