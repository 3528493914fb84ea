//! The CDN edge: `artq serve` in front of HTTP/1.1 origins.
//!
//! Pieces, bottom up:
//! - [`http1`]: the sans-IO HTTP/1.1 client codec of one origin connection
//!   (request heads and bodies out, response heads and bodies in);
//! - [`headers`]: which fields cross the proxy and which are added;
//! - [`cache`]: RFC 9111's plain cases and a bounded in-memory store;
//! - [`live`]: live responses shared by their viewers, with the rule of
//!   where a late joiner starts.

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
