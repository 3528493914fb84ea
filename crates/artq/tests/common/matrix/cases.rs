//! The matrix's cases: what each asks of the client, the files, the
//! network, the evidence beyond byte-exact files, and the deadline (see the
//! parent module for how a case runs).

use std::time::Duration;

/// The runner's KB.
const KIB: u64 = 1 << 10;
/// The runner's MB.
const MIB: u64 = 1 << 20;

/// Evidence a case needs beyond byte-exact files.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// The client made exactly this many connections (qlog files): the
    /// runner's handshake count.
    Connections(usize),
    /// The client received no Retry.
    NoRetry,
    /// The client received a Retry (and, with [`Check::Connections`], then
    /// completed the one connection).
    RetryReceived,
    /// Both endpoints sent 1-RTT packets in key phase 1 (the runner's
    /// `keyupdate` check, from the client's qlog: sent and received).
    KeyPhase1BothWays,
    /// The server's initial_max_streams_bidi is at most this (the runner's
    /// `multiplexing` check: the client must wait for MAX_STREAMS).
    MaxStreamsBidiAtMost(u64),
    /// The server obeyed the 3x amplification limit, checked on the link's
    /// capture, and sent at least this many bytes in Handshake packets.
    AmplificationLimit {
        /// The least the server's Handshake packets must add up to.
        min_handshake_bytes: usize,
    },
    /// The link's `--blackhole` window fell inside the connection.
    OutageSpanned,
    /// The second connection resumed the first one's TLS session.
    SecondResumed,
    /// The client sent 0-RTT packets on one of its two connections, and
    /// the server acknowledged some (it accepted the early data).
    ZeroRttSent,
    /// `artq serve` only (its `--stats-json`): the connection ended on the
    /// server's preferred address after one path change.
    MovedToPreferredAddress,
    /// `artq serve --ecn` only (its `--stats-json`): it sent ECT(0)-marked
    /// packets and the client's ACK frames carried ECN counts that
    /// validated them (RFC 9000 §13.4.2).
    EcnValidated,
}

/// Which client a case runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// quic-go's interop client with `TESTCASE` = the case's
    /// `client_testcase` ([`super::super::quic_go_interop`]).
    QuicGo,
    /// aioquic's client (`tests/interop/aioquic_client.py`, one run per
    /// file), for a case quic-go's client cannot run; it writes no qlog, so
    /// such a case's evidence comes from the server.
    Aioquic,
}

/// One case of the matrix.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// The runner's name of the case.
    pub name: &'static str,
    /// `$TESTCASE` for the client.
    pub client_testcase: &'static str,
    /// The client that runs the case.
    pub client: Client,
    /// `$TESTCASE` for quic-go's interop server.
    pub server_testcase: &'static str,
    /// The files: (how many, size in bytes) groups.
    pub files: &'static [(usize, u64)],
    /// `artq link` options; `None` to connect directly over loopback.
    pub link: Option<&'static [&'static str]>,
    /// Extra `artq serve` options.
    pub artq_args: &'static [&'static str],
    /// Whether the server presents the runner's 9-certificate RSA chain
    /// (else `artq serve` makes its own certificate, and quic-go's server
    /// gets a self-signed ECDSA one).
    pub long_chain: bool,
    /// When the client is killed and the case fails.
    pub deadline: Duration,
    /// What else must hold.
    pub checks: &'static [Check],
}

/// The runner's network: 10 Mbit/s, 15 ms each way, a 25-packet drop-tail
/// queue (its `simple-p2p --delay=15ms --bandwidth=10Mbps --queue=25`).
macro_rules! runner_link {
    ($($extra:literal),* $(,)?) => {
        Some(&["--bw", "10", "--rtt", "30", "--queue", "25", $($extra),*])
    };
}

/// `handshake`: one 1 KB file over loopback, one connection, no Retry.
pub const HANDSHAKE: Case = Case {
    name: "handshake",
    client_testcase: "handshake",
    client: Client::QuicGo,
    server_testcase: "handshake",
    files: &[(1, KIB)],
    link: None,
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(60),
    checks: &[Check::Connections(1), Check::NoRetry],
};

/// `transfer`: 2, 3 and 5 MB requested at once over one connection, over
/// loopback.
pub const TRANSFER: Case = Case {
    name: "transfer",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 2 * MIB), (1, 3 * MIB), (1, 5 * MIB)],
    link: None,
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::Connections(1)],
};

/// `multiplexing`: 1999 files of 32 bytes requested at once over one
/// connection; the server's stream limit must make the client wait for
/// MAX_STREAMS (at most 1000 bidirectional streams at first).
pub const MULTIPLEXING: Case = Case {
    name: "multiplexing",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1999, 32)],
    link: None,
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(120),
    checks: &[Check::Connections(1), Check::MaxStreamsBidiAtMost(1000)],
};

/// `chacha20`: a 3 MB file with a client that offers only
/// TLS_CHACHA20_POLY1305_SHA256.
pub const CHACHA20: Case = Case {
    name: "chacha20",
    client_testcase: "chacha20",
    client: Client::QuicGo,
    server_testcase: "chacha20",
    files: &[(1, 3 * MIB)],
    link: None,
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(60),
    checks: &[Check::Connections(1)],
};

/// `keyupdate`: a 3 MB file; the client updates its keys after 100
/// packets and the server must follow (both send in key phase 1).
pub const KEYUPDATE: Case = Case {
    name: "keyupdate",
    client_testcase: "keyupdate",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 3 * MIB)],
    link: None,
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(60),
    checks: &[Check::Connections(1), Check::KeyPhase1BothWays],
};

/// `retry`: a 10 KB file from a server that sends a Retry
/// (`artq serve --retry`).
pub const RETRY: Case = Case {
    name: "retry",
    client_testcase: "retry",
    client: Client::QuicGo,
    server_testcase: "retry",
    files: &[(1, 10 * KIB)],
    link: None,
    artq_args: &["--retry"],
    long_chain: false,
    deadline: Duration::from_secs(60),
    checks: &[Check::Connections(1), Check::RetryReceived],
};

/// Connections of the handshake loss and corruption cases, as in the
/// runner (about half a minute against quic-go's server here).
const HANDSHAKE_RUNS: usize = 50;

/// `handshakeloss`: 50 files of 1 KB, one connection each, one after
/// another, through the runner's link dropping 30% of the datagrams each
/// way, at most 3 in a row (its `drop-rate` with `--burst 3`).
pub const HANDSHAKELOSS: Case = Case {
    name: "handshakeloss",
    client_testcase: "multiconnect",
    client: Client::QuicGo,
    server_testcase: "multiconnect",
    files: &[(HANDSHAKE_RUNS, KIB)],
    link: runner_link!("--loss", "0.3", "--loss-max-burst", "3"),
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(180),
    checks: &[Check::Connections(HANDSHAKE_RUNS)],
};

/// `transferloss`: a 2 MB file through the runner's link dropping 2% each
/// way, at most 3 in a row.
pub const TRANSFERLOSS: Case = Case {
    name: "transferloss",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 2 * MIB)],
    link: runner_link!("--loss", "0.02", "--loss-max-burst", "3"),
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::Connections(1)],
};

/// `handshakecorruption`: as `handshakeloss`, with 30% of the datagrams
/// each way corrupted instead of dropped: one byte among the first 51
/// replaced by another (the runner's `corrupt-rate`, which aims at the
/// QUIC header; Version Negotiation packets are spared, as there).
pub const HANDSHAKECORRUPTION: Case = Case {
    name: "handshakecorruption",
    client_testcase: "multiconnect",
    client: Client::QuicGo,
    server_testcase: "multiconnect",
    files: &[(HANDSHAKE_RUNS, KIB)],
    link: runner_link!("--corrupt", "0.3", "--corrupt-span", "51"),
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(180),
    checks: &[Check::Connections(HANDSHAKE_RUNS)],
};

/// `transfercorruption`: a 2 MB file with 2% of the datagrams each way
/// corrupted in their first 51 bytes.
pub const TRANSFERCORRUPTION: Case = Case {
    name: "transfercorruption",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 2 * MIB)],
    link: runner_link!("--corrupt", "0.02", "--corrupt-span", "51"),
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::Connections(1)],
};

/// `blackhole`: a 5 MB file (4.2 s at 10 Mbit/s) through the runner's link,
/// which drops everything both ways from 1.5 s to 3.5 s after the relay
/// starts (the runner: 10 MB, on 5 s, off 2 s).
pub const BLACKHOLE: Case = Case {
    name: "blackhole",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 5 * MIB)],
    link: runner_link!("--blackhole", "1500-3500"),
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::Connections(1), Check::OutageSpanned],
};

/// `amplificationlimit`: a 5 KB file from a server presenting a chain of 9
/// RSA certificates (about 8 KB) while the link lets the client's
/// ClientHello through and then drops its next six datagrams: the server is
/// stuck at its amplification limit until the client's address is
/// validated, and must not exceed it. Checked on the relay's capture; the
/// server must send at least 7500 bytes of Handshake packets (the runner's
/// check that the chain was used). The runner drops datagrams 2 to 7
/// (`droplist --drops_to_server=2,3,4,5,6,7`, "let the ClientHello pass"),
/// written when a ClientHello fit one datagram; quic-go's now takes two (its
/// X25519MLKEM768 key share), so here the drops are 3 to 8. With 2 to 7 the
/// server would never have the whole ClientHello before the client's
/// address is validated, and the limit would never be tested.
pub const AMPLIFICATIONLIMIT: Case = Case {
    name: "amplificationlimit",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 5 * KIB)],
    link: runner_link!("--up-drop", "3-8"),
    artq_args: &[],
    long_chain: true,
    deadline: Duration::from_secs(60),
    checks: &[
        Check::Connections(1),
        Check::AmplificationLimit {
            min_handshake_bytes: 7500,
        },
    ],
};

/// `rebind-port`: a 5 MB file (4.2 s at 10 Mbit/s) through the runner's
/// link, whose NAT gives the client a new port every second: the server
/// must follow each move (RFC 9000 §9) or lose everything it sends to the
/// old binding. The server runs two workers (`--threads 2`): each new port
/// hashes to either worker's socket, and a worker that receives a datagram
/// of the other's connection passes it on by its connection ID.
pub const REBIND_PORT: Case = Case {
    name: "rebind-port",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 5 * MIB)],
    link: runner_link!("--rebind-every", "1000"),
    artq_args: &["--threads", "2"],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::Connections(1)],
};

/// `rebind-addr`: as `rebind-port`, with a new address each time
/// (127.0.0.2, .3, ...): the server validates each new path and starts its
/// congestion control afresh there.
pub const REBIND_ADDR: Case = Case {
    name: "rebind-addr",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 5 * MIB)],
    link: runner_link!("--rebind-every", "1000", "--rebind-address"),
    artq_args: &["--threads", "2"],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::Connections(1)],
};

/// `resumption`: the client downloads the first file on one connection,
/// then the rest (4 of 10 KB) on a second connection that resumes the TLS
/// session with the ticket the server gave on the first (`artq serve`
/// issues tickets by default). The first file is 500 KB so that the first connection
/// outlives the ticket's arrival on a loaded machine: quic-go's client
/// starts the second connection as soon as the first file is in, and
/// quic-go's own server (the self-check) sends its ticket a little after
/// the handshake; with a 10 KB first file the self-check failed about one
/// run in five when two cases ran at once.
pub const RESUMPTION: Case = Case {
    name: "resumption",
    client_testcase: "resumption",
    client: Client::QuicGo,
    server_testcase: "resumption",
    files: &[(1, 500 * KIB), (4, 10 * KIB)],
    link: None,
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(60),
    checks: &[Check::Connections(2), Check::SecondResumed],
};

/// `zerortt`: as `resumption` (a 500 KB first file, for the same
/// reason), with the second connection's requests (39 files of 5 KB: the
/// runner's count is larger) sent in 0-RTT packets, which the server must
/// read and answer.
///
/// It runs through the runner's link (30 ms RTT), as the runner does. Over
/// bare loopback the handshake completes in about a millisecond, and
/// quic-go's client sends a request in 0-RTT only if its goroutine writes
/// it before then: on a loaded machine it sometimes did not (its qlog
/// shows the 0-RTT keys installed and the first request written 0.2 ms
/// after the 1-RTT keys), and the case failed with no fault in the server.
pub const ZERORTT: Case = Case {
    name: "zerortt",
    client_testcase: "zerortt",
    client: Client::QuicGo,
    server_testcase: "zerortt",
    files: &[(1, 500 * KIB), (39, 5 * KIB)],
    link: runner_link!(),
    artq_args: &["--0rtt"],
    long_chain: false,
    deadline: Duration::from_secs(60),
    checks: &[
        Check::Connections(2),
        Check::SecondResumed,
        Check::ZeroRttSent,
    ],
};

/// Not a runner case (issue 15): the `keyupdate` client (its first key
/// update after 100 packets) downloads 3 MB while 10% of its datagrams
/// reach the server corrupted in their first 51 bytes, often in the header
/// or in the sample its protection is keyed from. The server must discard
/// the corrupted copies without losing track of the key phase, and follow
/// the client into key phase 1.
pub const KEYUPDATE_AFTER_CORRUPTION: Case = Case {
    name: "keyupdate-after-corruption",
    client_testcase: "keyupdate",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, 3 * MIB)],
    link: runner_link!("--up-corrupt", "0.1", "--corrupt-span", "51"),
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::Connections(1), Check::KeyPhase1BothWays],
};

/// `connectionmigration`: `artq serve --preferred-address 127.0.0.2:0`
/// offers a second address (RFC 9000 §9.6); the client must move its
/// connection there after the handshake and download a 2 MB file, over
/// loopback. quic-go's interop client does not know this case (it exits
/// 127: quic-go's client never follows a preferred address), so aioquic's
/// client runs it, as the runner would with a client that does. The
/// evidence is the server's: the connection ended on the preferred address.
/// Two workers (`--threads 2`): the move changes the 4-tuple, and with it
/// the worker the kernel hands the datagrams to.
pub const CONNECTIONMIGRATION: Case = Case {
    name: "connectionmigration",
    client_testcase: "connectionmigration",
    client: Client::Aioquic,
    server_testcase: "connectionmigration",
    files: &[(1, 2 * MIB)],
    link: None,
    artq_args: &["--preferred-address", "127.0.0.2:0", "--threads", "2"],
    long_chain: false,
    deadline: Duration::from_secs(90),
    checks: &[Check::MovedToPreferredAddress],
};

/// `ecn`: a 1 MB file from `artq serve` (ECN on by default) over loopback: the server
/// marks ECT(0), and the client's ACK frames must carry ECN counts that
/// validate the marks. quic-go's interop client does not know the name
/// `ecn` (it exits 127) but uses ECN on every connection on Linux (it reads
/// the codepoints and reports them), which is what the runner's case checks,
/// so it runs the `transfer` test case here.
pub const ECN: Case = Case {
    name: "ecn",
    client_testcase: "transfer",
    client: Client::QuicGo,
    server_testcase: "transfer",
    files: &[(1, MIB)],
    link: None,
    artq_args: &[],
    long_chain: false,
    deadline: Duration::from_secs(60),
    checks: &[Check::Connections(1), Check::EcnValidated],
};
