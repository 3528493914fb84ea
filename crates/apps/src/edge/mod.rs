//! The CDN edge: `artq serve` in front of HTTP/1.1 origins
//! (docs/edge.md is the user's guide).
//!
//! Why it exists: the papers' schemes run in servers that stand in front
//! of origins and live encoders; [`crate::server::HttpServer::with_edge`]
//! makes the artq server one, so ART and AutoRec meet real origins'
//! timing and real players.
//!
//! Pieces, bottom up:
//! - [`origin_io`]: the seam to the driver that owns the origin sockets
//!   (the edge never opens one: sans-IO like the transport);
//! - [`http1`]: the sans-IO HTTP/1.1 client codec of one origin connection
//!   (request heads and bodies out, response heads and bodies in);
//! - [`headers`]: which fields cross the proxy and which are added;
//! - [`routes`]: which origin a path goes to;
//! - [`cache`]: RFC 9111's plain cases and a bounded in-memory store;
//! - [`live`]: live responses shared by their viewers, with the rule of
//!   where a late joiner starts;
//! - [`proxy`]: the [`Edge`] itself, which owns the origin connections,
//!   the requests in flight, the cache and the live relays.

pub mod cache;
pub mod headers;
pub mod http1;
pub mod live;
pub mod origin_io;
pub mod proxy;
pub mod routes;

pub use origin_io::{OriginCommand, OriginConn, OriginIo};
pub use proxy::{Edge, EdgeCounters, EdgeOptions, HeadPoll, ViewId};
pub use routes::{Routes, Upstream, UpstreamSpec};

#[cfg(test)]
mod tests;
