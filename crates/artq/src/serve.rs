//! `artq serve`: an hq-interop file server over the artq QUIC stack.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use transport::connection::Event;
use transport::events::QlogWriter;
use transport::streams::{ReadError, StreamEvent, WriteError};
use transport::{ConnectionHandle, Endpoint, EndpointConfig, ServerConfig, TransportConfig};
use wire::time::Instant;
use wire::{Dir, StreamId};

use crate::hq;
use crate::udp::{App, Driver, Flow};

/// Settings of `artq serve`.
pub struct ServeOptions {
    /// Address to bind.
    pub listen: SocketAddr,
    /// Directory whose files are served.
    pub root: PathBuf,
    /// Transport settings (recovery scheme, congestion control, windows).
    pub transport: TransportConfig,
    /// PEM certificate chain and key; self-signed when absent.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// Write one qlog file per connection here.
    pub qlog: Option<PathBuf>,
    /// Seeds connection IDs and every random choice of the stack.
    pub seed: u64,
}

/// Run the server until the process is killed.
pub fn run(opts: ServeOptions) -> Result<()> {
    let root = opts
        .root
        .canonicalize()
        .with_context(|| format!("--root {}: no such directory", opts.root.display()))?;
    anyhow::ensure!(
        root.is_dir(),
        "--root {} is not a directory",
        root.display()
    );
    let (chain, key) = match &opts.cert {
        Some((c, k)) => (
            transport::crypto::load_pem_chain(c)?,
            transport::crypto::load_pem_key(k)?,
        ),
        None => transport::crypto::self_signed(&["localhost", "127.0.0.1", "::1"])?,
    };
    let tls = transport::crypto::server_config(chain, key, &[hq::ALPN])?;
    if let Some(dir) = &opts.qlog {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create --qlog {}", dir.display()))?;
    }
    let server = ServerConfig {
        tls,
        transport: Arc::new(opts.transport),
    };
    let mut endpoint = Endpoint::new(EndpointConfig::server(opts.seed, server));
    let mut driver =
        Driver::bind(opts.listen).with_context(|| format!("cannot bind {}", opts.listen))?;
    let addr = driver.local_addr()?;
    println!("listening on {addr}");
    io::stdout().flush()?;
    let mut app = FileServer {
        root,
        qlog: opts.qlog,
        requests: BTreeMap::new(),
        transfers: BTreeMap::new(),
        accepted: 0,
    };
    driver.run(&mut endpoint, &mut app, None)?;
    Ok(())
}

/// A file being sent on a stream.
struct Transfer {
    file: File,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
}

struct FileServer {
    root: PathBuf,
    qlog: Option<PathBuf>,
    /// Request bytes received so far, per stream.
    requests: BTreeMap<(ConnectionHandle, StreamId), Vec<u8>>,
    transfers: BTreeMap<(ConnectionHandle, StreamId), Transfer>,
    accepted: u64,
}

const CHUNK: usize = 64 * 1024;

impl FileServer {
    fn on_new_connection(&mut self, ep: &mut Endpoint, h: ConnectionHandle) {
        self.accepted += 1;
        let Some(dir) = &self.qlog else { return };
        let path = dir.join(format!("server-{}.sqlog", self.accepted));
        match File::create(&path) {
            Ok(f) => {
                if let Some(conn) = ep.connection_mut(h) {
                    conn.subscribe(Box::new(QlogWriter::new(
                        BufWriter::new(f),
                        "artq serve",
                        true,
                    )));
                }
            }
            Err(e) => eprintln!("warning: cannot write qlog {}: {e}", path.display()),
        }
    }

    /// Read request bytes; start a transfer once a request is complete.
    fn read_requests(&mut self, ep: &mut Endpoint, h: ConnectionHandle) {
        let Some(conn) = ep.connection_mut(h) else {
            return;
        };
        while let Some(id) = conn.streams().accept(Dir::Bi) {
            self.requests.insert((h, id), Vec::new());
        }
        let keys: Vec<(ConnectionHandle, StreamId)> = self
            .requests
            .range((h, StreamId(0))..=(h, StreamId(u64::MAX)))
            .map(|(k, _)| *k)
            .collect();
        let mut tmp = [0u8; 1024];
        for key in keys {
            let mut fin = false;
            loop {
                match conn.streams().read(key.1, &mut tmp) {
                    Ok(Some(n)) => {
                        if let Some(r) = self.requests.get_mut(&key) {
                            r.extend_from_slice(&tmp[..n]);
                            if r.len() > hq::MAX_REQUEST {
                                break;
                            }
                        }
                    }
                    Ok(None) => {
                        fin = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(_) => {
                        self.requests.remove(&key);
                        break;
                    }
                }
            }
            let Some(buf) = self.requests.get(&key) else {
                continue;
            };
            let Some(parsed) = hq::parse_request(buf, fin) else {
                continue;
            };
            self.requests.remove(&key);
            let file = parsed
                .and_then(|p| hq::resolve(&self.root, &p))
                .ok()
                .and_then(|path| File::open(path).ok());
            match file {
                Some(file) => {
                    self.transfers.insert(
                        key,
                        Transfer {
                            file,
                            buf: Vec::with_capacity(CHUNK),
                            pos: 0,
                            eof: false,
                        },
                    );
                }
                None => {
                    // hq-interop has no status codes: refuse by resetting.
                    let _ = conn.streams().reset(key.1, 0x10);
                }
            }
        }
    }

    /// Move file bytes into streams until they are full.
    fn pump(&mut self, ep: &mut Endpoint, h: ConnectionHandle) {
        let Some(conn) = ep.connection_mut(h) else {
            return;
        };
        let keys: Vec<(ConnectionHandle, StreamId)> = self
            .transfers
            .range((h, StreamId(0))..=(h, StreamId(u64::MAX)))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            let Some(t) = self.transfers.get_mut(&key) else {
                continue;
            };
            let mut done = false;
            loop {
                if t.pos == t.buf.len() {
                    if t.eof {
                        let _ = conn.streams().finish(key.1);
                        done = true;
                        break;
                    }
                    t.buf.resize(CHUNK, 0);
                    match t.file.read(&mut t.buf) {
                        Ok(0) => {
                            t.buf.clear();
                            t.eof = true;
                        }
                        Ok(n) => t.buf.truncate(n),
                        Err(_) => {
                            let _ = conn.streams().reset(key.1, 0x11);
                            done = true;
                            break;
                        }
                    }
                    t.pos = 0;
                    continue;
                }
                match conn.streams().write(key.1, &t.buf[t.pos..]) {
                    Ok(n) => t.pos += n,
                    Err(WriteError::Blocked) => break,
                    Err(_) => {
                        done = true;
                        break;
                    }
                }
            }
            if done {
                self.transfers.remove(&key);
            }
        }
    }

    fn forget(&mut self, h: ConnectionHandle) {
        self.requests.retain(|k, _| k.0 != h);
        self.transfers.retain(|k, _| k.0 != h);
    }
}

impl App for FileServer {
    fn on_turn(&mut self, _now: Instant, ep: &mut Endpoint) -> Flow {
        while let Some(h) = ep.accept() {
            self.on_new_connection(ep, h);
        }
        for h in ep.handles() {
            let mut lost = false;
            while let Some(ev) = ep.connection_mut(h).and_then(|c| c.poll_event()) {
                match ev {
                    Event::ConnectionLost(reason) => {
                        if let Some(c) = ep.connection(h) {
                            let s = c.stats();
                            eprintln!(
                                "connection {} from {} ended ({reason}): sent {} packets ({} bytes), lost {}, replicas {}, n_max {}, n_hist {:?}, cwnd {} B, srtt {:.1} ms, min_rtt {:.1} ms",
                                h.0,
                                c.remote_address(),
                                s.packets_sent,
                                s.bytes_sent,
                                s.lost_packets,
                                s.replicas,
                                s.n_max,
                                s.n_hist,
                                s.cwnd,
                                s.srtt.as_secs_f64() * 1e3,
                                s.min_rtt.as_secs_f64() * 1e3,
                            );
                        }
                        lost = true;
                    }
                    Event::Stream(StreamEvent::Opened { .. })
                    | Event::Stream(StreamEvent::Readable { .. }) => {}
                    _ => {}
                }
            }
            if lost {
                self.forget(h);
                continue;
            }
            self.read_requests(ep, h);
            self.pump(ep, h);
        }
        Flow::Continue
    }
}
