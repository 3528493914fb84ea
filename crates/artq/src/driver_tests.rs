//! The two drivers run the same applications: the same file workload gives
//! the same bytes through the simulator (`lab::QuicNode`) and over real UDP
//! ([`crate::udp::Driver`]), and an application neither driver has heard of
//! runs through both unchanged.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use apps::files::{BodySink, ClientError, FilesClient, Paths};
use apps::http::ResponseHead;
use apps::workload::Workload;
use apps::{App, Host, Protocol};
use lab::node::{tls_configs, QuicNode};
use netem::{LinkSpec, Simulator};
use transport::streams::ReadError;
use transport::{
    ClientConfig, Connection, ConnectionHandle, Endpoint, EndpointConfig, Event, ServerConfig,
    TransportConfig,
};
use wire::time::{Duration, Instant};
use wire::Dir;

use crate::udp::{Driver, Stop};

const SERVER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 4433);
const CLIENT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50000);
const CONTENT_SEED: u64 = 77;

/// Keeps every body, file by file.
#[derive(Clone, Default)]
struct Collect(Rc<RefCell<Vec<Vec<u8>>>>);

impl BodySink for Collect {
    fn start(&mut self, file: u64, head: &ResponseHead) -> Result<(), ClientError> {
        if head.status != 200 {
            return Err(ClientError::Status {
                file,
                status: head.status,
            });
        }
        self.0.borrow_mut().push(Vec::new());
        Ok(())
    }

    fn data(&mut self, _file: u64, _offset: u64, bytes: &[u8]) -> Result<(), ClientError> {
        if let Some(last) = self.0.borrow_mut().last_mut() {
            last.extend_from_slice(bytes);
        }
        Ok(())
    }

    fn end(&mut self, _file: u64, _received: u64) -> Result<(), ClientError> {
        Ok(())
    }
}

fn configs(protocol: Protocol) -> (ServerConfig, ClientConfig) {
    let (server_tls, client_tls) = tls_configs(protocol).expect("TLS configurations");
    (
        ServerConfig {
            tls: server_tls,
            transport: Arc::new(TransportConfig::default()),
            preferred_address: Default::default(),
        },
        ClientConfig {
            tls: client_tls,
            transport: Arc::new(TransportConfig::default()),
            server_name: "localhost".into(),
        },
    )
}

/// Runs `server` and `client` applications in the simulator over a lossy
/// 20 Mbit/s, 20 ms path until both are finished; returns the simulator and
/// the client's node.
fn run_in_sim(
    server: Box<dyn App>,
    client: Box<dyn App>,
    protocol: Protocol,
) -> (Simulator, netem::NodeId) {
    let (server_cfg, client_cfg) = configs(protocol);
    let spec = LinkSpec {
        bw: Some(20.0),
        rtt: 20.0,
        loss: Some(0.02),
        ..LinkSpec::default()
    };
    let (up, down) = spec.configs().expect("valid link");
    let mut sim = Simulator::new();
    let up = sim.add_link(up, 1);
    let down = sim.add_link(down, 2);
    sim.route(CLIENT, SERVER, &[up]).expect("route");
    sim.route(SERVER, CLIENT, &[down]).expect("route");
    let server_host = Host::new(Endpoint::new(EndpointConfig::server(3, server_cfg)), server);
    let mut client_host = Host::new(Endpoint::new(EndpointConfig::client(4)), client);
    client_host
        .connect(Instant::ZERO, &client_cfg, SERVER)
        .expect("connect");
    sim.add_node(SERVER, QuicNode::new(SERVER, server_host));
    let client_id = sim.add_node(CLIENT, QuicNode::new(CLIENT, client_host));
    let outcome = sim.run_until(Instant::ZERO + Duration::from_secs(120));
    assert_eq!(
        outcome,
        netem::RunOutcome::Finished,
        "the simulated run must finish"
    );
    (sim, client_id)
}

/// Runs `make_server`'s and `client`'s applications over real UDP on
/// loopback (the server on its own thread) until both are finished;
/// returns the client host.
fn run_over_udp(
    make_server: impl FnOnce() -> Box<dyn App> + Send + 'static,
    client: Box<dyn App>,
    protocol: Protocol,
) -> Host {
    let (tx, rx) = std::sync::mpsc::channel();
    let server_thread = std::thread::spawn(move || {
        let (server_cfg, _) = configs(protocol);
        let mut driver = Driver::bind("127.0.0.1:0".parse().expect("address")).expect("bind");
        tx.send(driver.local_addr().expect("bound"))
            .expect("send address");
        let endpoint = Endpoint::new(EndpointConfig::server(3, server_cfg));
        let mut host = Host::new(endpoint, make_server());
        let deadline = StdInstant::now() + StdDuration::from_secs(60);
        driver.run(
            &mut host,
            Stop {
                when_finished: true,
                deadline: Some(deadline),
                signal: None,
                handshake_of: None,
            },
        )
    });
    let server_addr = rx.recv().expect("server address");
    let (_, client_cfg) = configs(protocol);
    let mut driver = Driver::bind("127.0.0.1:0".parse().expect("address")).expect("bind");
    let mut host = Host::new(Endpoint::new(EndpointConfig::client(4)), client);
    host.connect(driver.clock().now(), &client_cfg, server_addr)
        .expect("connect");
    let deadline = StdInstant::now() + StdDuration::from_secs(60);
    driver
        .run(
            &mut host,
            Stop {
                when_finished: true,
                deadline: Some(deadline),
                signal: None,
                handshake_of: None,
            },
        )
        .expect("the client finishes before the deadline");
    server_thread
        .join()
        .expect("server thread")
        .expect("the server finishes once the client has closed");
    host
}

/// The file workload's bytes, as the generator makes them.
fn generated(files: u64, size: u64) -> Vec<Vec<u8>> {
    (0..files)
        .map(|i| {
            let mut v = vec![0u8; size as usize];
            let mut c = apps::content::FileContent::new(CONTENT_SEED, i, size);
            assert_eq!(c.fill(&mut v), size as usize);
            v
        })
        .collect()
}

fn files_client(protocol: Protocol, files: u64, sink: Collect) -> Box<dyn App> {
    Box::new(FilesClient::new(
        protocol,
        Some("localhost".into()),
        Paths::Indexed(files),
        Box::new(sink),
    ))
}

fn same_bytes_through_both_drivers(protocol: Protocol) {
    const FILES: u64 = 3;
    const SIZE: u64 = 300_000;
    let workload = Workload::files(FILES, SIZE);
    let want = generated(FILES, SIZE);

    let in_sim = Collect::default();
    let (sim, client) = run_in_sim(
        workload.server_app(CONTENT_SEED),
        files_client(protocol, FILES, in_sim.clone()),
        protocol,
    );
    let host = sim.node::<QuicNode>(client).expect("client node").host();
    let sim_report = host
        .app::<FilesClient>()
        .expect("files client")
        .report()
        .clone();
    assert_eq!(sim_report.error, None);

    let over_udp = Collect::default();
    let host = run_over_udp(
        move || workload.server_app(CONTENT_SEED),
        files_client(protocol, FILES, over_udp.clone()),
        protocol,
    );
    let udp_report = host
        .app::<FilesClient>()
        .expect("files client")
        .report()
        .clone();
    assert_eq!(udp_report.error, None);

    assert!(
        *in_sim.0.borrow() == want,
        "simulated bytes differ from the content"
    );
    assert!(
        *over_udp.0.borrow() == want,
        "UDP bytes differ from the content"
    );
    assert_eq!(sim_report.bytes_received, FILES * SIZE);
    assert_eq!(udp_report.bytes_received, sim_report.bytes_received);
    assert_eq!(udp_report.files.len(), sim_report.files.len());
}

#[test]
fn file_workload_gives_the_same_bytes_in_both_drivers_over_hq_interop() {
    same_bytes_through_both_drivers(Protocol::HqInterop);
}

#[test]
fn file_workload_gives_the_same_bytes_in_both_drivers_over_h3() {
    same_bytes_through_both_drivers(Protocol::H3);
}

/// A trivial application that neither driver, nor the registry of
/// workloads, knows: the client sends `ping` on a stream, the server
/// answers `pong`, the client closes. It runs through both drivers as is.
mod ping {
    use super::*;

    /// The server: answers every finished `ping` stream with `pong`.
    #[derive(Default)]
    pub struct Server {
        conns: Vec<ConnectionHandle>,
        pending: Vec<(ConnectionHandle, wire::StreamId, Vec<u8>)>,
    }

    impl App for Server {
        fn on_connection(&mut self, _: Instant, h: ConnectionHandle, _: &mut Connection) {
            self.conns.push(h);
        }
        fn on_event(&mut self, _: Instant, h: ConnectionHandle, conn: &mut Connection, ev: &Event) {
            if let Event::Stream(transport::streams::StreamEvent::Opened { .. }) = ev {
                while let Some(id) = conn.streams().accept(Dir::Bi) {
                    self.pending.push((h, id, Vec::new()));
                }
            }
        }
        fn drive(&mut self, _: Instant, ep: &mut Endpoint) {
            let mut buf = [0u8; 64];
            self.pending.retain_mut(|(h, id, got)| {
                let Some(conn) = ep.connection_mut(*h) else {
                    return false;
                };
                loop {
                    match conn.streams().read(*id, &mut buf) {
                        Ok(Some(n)) => got.extend_from_slice(&buf[..n]),
                        Ok(None) => {
                            let reply: &[u8] = if got == b"ping" { b"pong" } else { b"what?" };
                            let _ = conn.streams().write(*id, reply);
                            let _ = conn.streams().finish(*id);
                            return false;
                        }
                        Err(ReadError::Blocked) => return true,
                        Err(_) => return false,
                    }
                }
            });
        }
        fn is_finished(&self, ep: &Endpoint) -> bool {
            !self.conns.is_empty()
                && self
                    .conns
                    .iter()
                    .all(|&h| ep.connection(h).is_none_or(|c| c.is_closed()))
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    /// The client: one `ping`, then waits for the answer and closes.
    #[derive(Default)]
    pub struct Client {
        conn: Option<ConnectionHandle>,
        stream: Option<wire::StreamId>,
        pub answer: Vec<u8>,
        done: bool,
    }

    impl App for Client {
        fn on_connection(&mut self, _: Instant, h: ConnectionHandle, _: &mut Connection) {
            self.conn = Some(h);
        }
        fn on_event(&mut self, _: Instant, _: ConnectionHandle, conn: &mut Connection, ev: &Event) {
            if *ev == Event::Connected {
                let id = conn.streams().open(Dir::Bi).expect("a stream");
                conn.streams().write(id, b"ping").expect("room for 4 bytes");
                conn.streams().finish(id).expect("finish");
                self.stream = Some(id);
            }
        }
        fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
            let (Some(h), Some(id)) = (self.conn, self.stream) else {
                return;
            };
            let Some(conn) = ep.connection_mut(h) else {
                return;
            };
            let mut buf = [0u8; 64];
            while !self.done {
                match conn.streams().read(id, &mut buf) {
                    Ok(Some(n)) => self.answer.extend_from_slice(&buf[..n]),
                    Ok(None) => {
                        self.done = true;
                        conn.close(now, 0, b"bye");
                    }
                    Err(_) => break,
                }
            }
        }
        fn is_finished(&self, ep: &Endpoint) -> bool {
            self.done
                && self
                    .conn
                    .and_then(|h| ep.connection(h))
                    .is_none_or(|c| c.is_closed())
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
}

#[test]
fn an_application_unknown_to_the_drivers_runs_through_both() {
    // Any ALPN the TLS configurations carry will do: the drivers never look.
    let protocol = Protocol::HqInterop;
    let (sim, client) = run_in_sim(
        Box::<ping::Server>::default(),
        Box::<ping::Client>::default(),
        protocol,
    );
    let host = sim.node::<QuicNode>(client).expect("client node").host();
    assert_eq!(
        host.app::<ping::Client>().expect("ping client").answer,
        b"pong"
    );
    let host = run_over_udp(
        || Box::<ping::Server>::default(),
        Box::<ping::Client>::default(),
        protocol,
    );
    assert_eq!(
        host.app::<ping::Client>().expect("ping client").answer,
        b"pong"
    );
}

/// The video workloads run through both drivers: the live stream (paced by
/// virtual time in one, real time in the other) and DASH deliver every
/// frame and segment to the same players.
#[test]
fn video_workloads_play_through_both_drivers() {
    use apps::video::live::LiveParams;
    use apps::workload::{DashWorkload, LiveWorkload, Playback};
    let protocol = Protocol::HqInterop;
    for workload in [
        Workload::Live(LiveWorkload {
            params: LiveParams::new(1000, 2),
            startup_delay_ms: 1000,
        }),
        Workload::Dash(DashWorkload { seconds: 10 }),
    ] {
        let (sim, client) = run_in_sim(
            workload.server_app(CONTENT_SEED),
            workload.client_app(CONTENT_SEED, protocol).expect("client"),
            protocol,
        );
        let in_sim = workload
            .client_report(sim.node::<QuicNode>(client).expect("client node").host())
            .expect("report");
        let started = StdInstant::now();
        let host = run_over_udp(
            move || workload.server_app(CONTENT_SEED),
            workload.client_app(CONTENT_SEED, protocol).expect("client"),
            protocol,
        );
        let over_udp = workload.client_report(&host).expect("report");
        for r in [&in_sim, &over_udp] {
            assert_eq!(r.error, None, "{workload:?}");
            assert!(r.done_at.is_some(), "{workload:?}");
        }
        match (in_sim.playback, over_udp.playback) {
            (Some(Playback::Live(a)), Some(Playback::Live(b))) => {
                assert_eq!((a.frames, b.frames), (60, 60));
                assert_eq!(a.payload_bytes, b.payload_bytes, "same seeded stream");
                assert_eq!(a.playout.played, b.playout.played);
                // Real time: the 2 s stream took its time (its last
                // frame is captured at 59/30 s).
                assert!(started.elapsed() >= StdDuration::from_millis(1966));
                // Virtual time: the stream ended about 2 s after it began.
                let end = in_sim.done_at.expect("done").since_epoch();
                assert!(
                    end >= Duration::from_millis(1966) && end < Duration::from_secs(4),
                    "{end:?}"
                );
            }
            (Some(Playback::Dash(a)), Some(Playback::Dash(b))) => {
                assert_eq!((a.segments, b.segments), (5, 5));
                assert_eq!(a.playout.played, b.playout.played);
                assert!(a.avg_bitrate_kbps > 0.0 && b.avg_bitrate_kbps > 0.0);
            }
            other => panic!("{workload:?}: {other:?}"),
        }
    }
}

/// A client of many connections that does nothing with them.
struct IdleCrowd;

impl App for IdleCrowd {
    fn on_connection(&mut self, _: Instant, _: ConnectionHandle, _: &mut Connection) {}
    fn on_event(&mut self, _: Instant, _: ConnectionHandle, _: &mut Connection, _: &Event) {}
    fn drive(&mut self, _: Instant, _: &mut Endpoint) {}
    fn is_finished(&self, _: &Endpoint) -> bool {
        true
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A server holding 200 idle connections and one busy one pays, per turn,
/// for the busy one: the application reads events only from connections
/// that acted and pumps only responses that can move (it visited every
/// connection on every turn before).
#[test]
fn an_idle_crowd_costs_the_server_nothing_per_turn() {
    const IDLE: usize = 200;
    const CROWD: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50001);
    let protocol = Protocol::H3;
    let (server_cfg, client_cfg) = configs(protocol);
    let spec = LinkSpec {
        bw: Some(20.0),
        rtt: 20.0,
        loss: Some(0.01),
        ..LinkSpec::default()
    };
    let mut sim = Simulator::new();
    for (i, client) in [CLIENT, CROWD].into_iter().enumerate() {
        let (up, down) = spec.configs().expect("valid link");
        let up = sim.add_link(up, 10 + 2 * i as u64);
        let down = sim.add_link(down, 11 + 2 * i as u64);
        sim.route(client, SERVER, &[up]).expect("route");
        sim.route(SERVER, client, &[down]).expect("route");
    }
    let workload = Workload::files(2, 2_000_000);
    let server_host = Host::new(
        Endpoint::new(EndpointConfig::server(3, server_cfg)),
        workload.server_app(CONTENT_SEED),
    );
    let mut crowd = Host::new(
        Endpoint::new(EndpointConfig::client(5)),
        Box::new(IdleCrowd),
    );
    for _ in 0..IDLE {
        crowd
            .connect(Instant::ZERO, &client_cfg, SERVER)
            .expect("connect");
    }
    let sink = Collect::default();
    let mut client = Host::new(
        Endpoint::new(EndpointConfig::client(4)),
        files_client(protocol, 2, sink.clone()),
    );
    client
        .connect(Instant::ZERO, &client_cfg, SERVER)
        .expect("connect");
    let server = sim.add_node(SERVER, QuicNode::new(SERVER, server_host));
    sim.add_node(CROWD, QuicNode::new(CROWD, crowd));
    sim.add_node(CLIENT, QuicNode::new(CLIENT, client));
    let _ = sim.run_until(Instant::ZERO + Duration::from_secs(20));
    assert_eq!(*sink.0.borrow(), generated(2, 2_000_000), "the download");
    let host = sim.node::<QuicNode>(server).expect("server node").host();
    assert!(host.endpoint().len() >= IDLE, "the crowd is still there");
    let work = host
        .app::<apps::server::HttpServer>()
        .expect("the HTTP server")
        .work();
    let per_turn = work.visits as f64 / work.turns as f64;
    assert!(work.turns > 1000, "{work:?}");
    assert!(
        per_turn < 3.0,
        "{per_turn:.1} connections visited per turn of {} held ({work:?})",
        IDLE + 1
    );
}
