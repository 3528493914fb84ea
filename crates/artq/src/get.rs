//! `artq get`: download one URL over hq-interop with the artq QUIC stack.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{bail, Context, Result};
use transport::connection::Event;
use transport::crypto::ServerVerification;
use transport::events::QlogWriter;
use transport::streams::ReadError;
use transport::{ClientConfig, ConnectionHandle, Endpoint, EndpointConfig, TransportConfig};
use wire::time::Instant;
use wire::{Dir, StreamId};

use crate::hq;
use crate::udp::{App, Driver, Flow};

/// Settings of `artq get`.
pub struct GetOptions {
    /// `https://host:port/path`.
    pub url: String,
    /// Output file; standard output when absent.
    pub output: Option<PathBuf>,
    /// Transport settings (receive window, congestion control).
    pub transport: TransportConfig,
    /// Skip certificate verification.
    pub insecure: bool,
    /// Trust these PEM certificates (CA or self-signed server certificate).
    pub ca: Option<PathBuf>,
    /// Give up after this long.
    pub timeout: StdDuration,
    /// Write a qlog of the connection to this file.
    pub qlog: Option<PathBuf>,
    /// Seed of the client's random choices.
    pub seed: u64,
}

/// Outcome of a download.
#[derive(Debug)]
pub struct GetReport {
    /// Payload bytes received.
    pub bytes: u64,
    /// From the connection attempt to the last byte.
    pub elapsed: StdDuration,
    /// The client connection's counters at the end of the download.
    pub stats: Option<transport::ConnectionStats>,
}

/// Split `https://host:port/path` into (host, port, path).
pub fn parse_url(url: &str) -> Result<(String, u16, String)> {
    let rest = url
        .strip_prefix("https://")
        .with_context(|| format!("'{url}': only https:// URLs are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6
            .split_once(']')
            .with_context(|| format!("'{url}': bad IPv6 address"))?;
        (h.to_string(), p.strip_prefix(':').unwrap_or("443"))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (authority.to_string(), "443"),
        }
    };
    if host.is_empty() {
        bail!("'{url}': missing host");
    }
    let port: u16 = port
        .parse()
        .with_context(|| format!("'{url}': bad port '{port}'"))?;
    Ok((host, port, path.to_string()))
}

/// Download the URL.
pub fn run(opts: GetOptions) -> Result<GetReport> {
    let (host, port, path) = parse_url(&opts.url)?;
    let remote: SocketAddr = (host.as_str(), port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .with_context(|| format!("{host} has no address"))?;
    let verification = if opts.insecure {
        ServerVerification::Insecure
    } else if let Some(ca) = &opts.ca {
        ServerVerification::Roots(transport::crypto::load_pem_chain(ca)?)
    } else {
        bail!("no way to verify the server: pass --ca FILE (its certificate) or --insecure");
    };
    let tls = transport::crypto::client_config(verification, &[hq::ALPN])?;
    let client = ClientConfig {
        tls,
        transport: Arc::new(opts.transport),
        server_name: host.clone(),
    };
    let bind: SocketAddr = if remote.is_ipv6() {
        "[::]:0".parse()?
    } else {
        "0.0.0.0:0".parse()?
    };
    let mut driver = Driver::bind(bind).context("cannot bind a UDP socket")?;
    let mut endpoint = Endpoint::new(EndpointConfig::client(opts.seed));
    let start = StdInstant::now();
    let now = driver.clock().now();
    let h = endpoint.connect(now, &client, remote)?;
    if let Some(q) = &opts.qlog {
        let f = File::create(q).with_context(|| format!("cannot create --qlog {}", q.display()))?;
        if let Some(conn) = endpoint.connection_mut(h) {
            conn.subscribe(Box::new(QlogWriter::new(
                BufWriter::new(f),
                "artq get",
                false,
            )));
        }
    }
    let sink: Box<dyn Write> = match &opts.output {
        Some(p) => Box::new(BufWriter::with_capacity(
            1 << 20,
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(BufWriter::new(io::stdout().lock())),
    };
    let mut app = Download {
        handle: h,
        path,
        stream: None,
        sink,
        bytes: 0,
        state: DownloadState::Connecting,
        error: None,
        finished_at: None,
        stats: None,
    };
    let deadline = start + opts.timeout;
    match driver.run(&mut endpoint, &mut app, Some(deadline)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            bail!(
                "timed out after {:?} ({} bytes received)",
                opts.timeout,
                app.bytes
            )
        }
        Err(e) => return Err(e.into()),
    }
    app.sink.flush().context("cannot write output")?;
    if let Some(e) = app.error {
        bail!(e);
    }
    let elapsed = app.finished_at.unwrap_or_else(StdInstant::now) - start;
    Ok(GetReport {
        bytes: app.bytes,
        elapsed,
        stats: app.stats,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum DownloadState {
    Connecting,
    Receiving,
    /// All data received; closing the connection.
    Closing,
}

struct Download {
    handle: ConnectionHandle,
    path: String,
    stream: Option<StreamId>,
    sink: Box<dyn Write>,
    bytes: u64,
    state: DownloadState,
    error: Option<String>,
    finished_at: Option<StdInstant>,
    stats: Option<transport::ConnectionStats>,
}

impl App for Download {
    fn on_turn(&mut self, now: Instant, ep: &mut Endpoint) -> Flow {
        let Some(conn) = ep.connection_mut(self.handle) else {
            // Drained: the close went out (or the peer vanished).
            if self.state != DownloadState::Closing && self.error.is_none() {
                self.error = Some("connection ended before the download completed".into());
            }
            return Flow::Stop;
        };
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Connected if self.stream.is_none() => {
                    let Some(id) = conn.streams().open(Dir::Bi) else {
                        self.error = Some("the server allows no bidirectional stream".into());
                        return Flow::Stop;
                    };
                    let req = format!("GET {}\r\n", self.path);
                    if conn.streams().write(id, req.as_bytes()).ok() != Some(req.len())
                        || conn.streams().finish(id).is_err()
                    {
                        self.error = Some("cannot send the request".into());
                        return Flow::Stop;
                    }
                    self.stream = Some(id);
                    self.state = DownloadState::Receiving;
                }
                Event::ConnectionLost(reason) if self.state != DownloadState::Closing => {
                    self.error = Some(format!("connection lost: {reason}"));
                    return Flow::Stop;
                }
                _ => {}
            }
        }
        if self.state == DownloadState::Closing {
            // Stop once the CONNECTION_CLOSE has been sent.
            return if conn.is_closed() {
                Flow::Stop
            } else {
                Flow::Continue
            };
        }
        let Some(id) = self.stream else {
            return Flow::Continue;
        };
        let mut buf = [0u8; 64 * 1024];
        loop {
            match conn.streams().read(id, &mut buf) {
                Ok(Some(n)) => {
                    if let Err(e) = self.sink.write_all(&buf[..n]) {
                        self.error = Some(format!("cannot write output: {e}"));
                        conn.close(now, 0, b"output error");
                        self.state = DownloadState::Closing;
                        return Flow::Continue;
                    }
                    self.bytes += n as u64;
                }
                Ok(None) => {
                    self.finished_at = Some(StdInstant::now());
                    self.stats = Some(conn.stats());
                    conn.close(now, 0, b"done");
                    self.state = DownloadState::Closing;
                    return Flow::Continue;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(code)) => {
                    self.error = Some(format!("the server refused the request (stream reset, code {code}): is the path right?"));
                    conn.close(now, 0, b"");
                    self.state = DownloadState::Closing;
                    return Flow::Continue;
                }
                Err(e) => {
                    self.error = Some(format!("stream error: {e:?}"));
                    return Flow::Stop;
                }
            }
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("https://127.0.0.1:4433/a/b").unwrap(),
            ("127.0.0.1".into(), 4433, "/a/b".into())
        );
        assert_eq!(
            parse_url("https://localhost").unwrap(),
            ("localhost".into(), 443, "/".into())
        );
        assert_eq!(
            parse_url("https://[::1]:5/x").unwrap(),
            ("::1".into(), 5, "/x".into())
        );
        assert!(parse_url("http://x/").is_err());
        assert!(parse_url("https://:4/").is_err());
        assert!(parse_url("https://h:99999/").is_err());
    }
}
