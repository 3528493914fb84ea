//! Scenario builders shared by several experiments: the constant-rate
//! lossy link most experiments run on (`base`, `cases`), the shared
//! LTE traces ([`trace`]), the RPC stand-in of §7.7 (`rpc_scenario`),
//! AutoRec's live-streaming testbed (`live_stream`, `live_scenario`),
//! and RCP's network of Table I in its models ([`Dumbbell`], [`Channel`],
//! [`Variant`]).
//!
//! Why a module of its own: it is a leaf like [`super::common`].
//! Experiment modules take what they share from here instead of from each
//! other, so none imports another experiment module.

use apps::messages::MessageParams;
use apps::video::live::LiveParams;
use apps::workload::{LiveWorkload, RpcWorkload, Workload};
use netem::LinkSpec;
use transport::congestion::CongestionAlgorithm;

use super::common::Case;
use crate::scenario::{FlowSpec, Scenario};

// ---- A lossy constant-rate link ----------------------------------------

/// Virtual-time limit of each run, seconds: large enough for 1000 files at
/// 10% loss, small enough to stop a run that cannot finish.
const TIME_LIMIT_S: f64 = 1e6;

/// A scenario with Bernoulli loss on a constant-rate link.
pub(super) fn base(scheme: &str, bw: f64, rtt: f64, loss: f64, workload: Workload) -> Scenario {
    Scenario {
        scheme: scheme.to_string(),
        time_limit: TIME_LIMIT_S,
        workload,
        link: LinkSpec {
            bw: Some(bw),
            rtt,
            loss: Some(loss),
            ..LinkSpec::default()
        },
        ..Scenario::default()
    }
}

/// One case per scheme of `schemes` in `group`, each scenario made by
/// `make` from the scheme.
pub(super) fn cases(group: &str, schemes: &[&str], make: impl Fn(&str) -> Scenario) -> Vec<Case> {
    schemes
        .iter()
        .map(|s| Case {
            group: group.to_string(),
            scheme: s.to_string(),
            scenario: make(s),
        })
        .collect()
}

// ---- The shared traces -------------------------------------------------

/// Where the shared traces are, relative to the repository root.
const TRACES: &str = "../shared/traces";

/// The path of trace `name`: under `../shared/traces` of the working
/// directory if it is there, else of the source tree this was built from
/// (tests run in a crate's directory), else the working directory's path
/// (the runs then fail naming it).
pub fn trace(name: &str) -> std::path::PathBuf {
    let here = std::path::Path::new(TRACES).join(name);
    if here.is_file() {
        return here;
    }
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(TRACES)
        .join(name);
    if built.is_file() {
        return built;
    }
    here
}

// ---- The RPC stand-in (art-fig26, art-plus-delay) -----------------------

/// The 4G-like path of the stand-in: bandwidth (Mbit/s) and RTT (ms).
pub(super) const PATH_4G: (f64, f64) = (20.0, 60.0);
/// Calls per second of the RPC client (the paper's clients: "100 times
/// per second").
pub(super) const RPC_RATE: u64 = 100;

/// The RPC stand-in for `scheme`: `rpcs` Poisson calls at 100/s over the
/// 4G-like path at Bernoulli loss `loss` (also `art-plus-delay`'s RPC
/// groups).
pub(super) fn rpc_scenario(scheme: &str, loss: f64, rpcs: u64) -> Scenario {
    base(
        scheme,
        PATH_4G.0,
        PATH_4G.1,
        loss,
        Workload::Rpc(RpcWorkload {
            rpcs,
            rate: RPC_RATE,
        }),
    )
}

// ---- AutoRec's live-streaming testbed (autorec-*, art-plus-delay) -------

/// Payload bitrate of the default setting, kbit/s (see the module doc).
pub const DEFAULT_KBPS: u32 = 7000;
/// The default bottleneck buffer, bytes.
const LIVE_BUFFER: u64 = 500_000;

/// One setting of the testbed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct LiveSetting {
    /// Bernoulli loss of the bottleneck.
    pub(super) loss: f64,
    /// Round-trip time, ms.
    pub(super) rtt: f64,
    /// Bottleneck bandwidth, Mbit/s.
    pub(super) bw: f64,
    /// Payload bitrate of the stream, kbit/s.
    pub(super) kbps: u32,
    /// Bottleneck buffer, bytes.
    pub(super) buffer: u64,
}

/// The default setting of the testbed (AutoRec's default group).
pub(super) const LIVE_BASE: LiveSetting = LiveSetting {
    loss: 0.05,
    rtt: 50.0,
    bw: 8.0,
    kbps: DEFAULT_KBPS,
    buffer: LIVE_BUFFER,
};

/// A live stream of `seconds` over the testbed in setting `s`.
pub(super) fn live_stream(scheme: &str, s: LiveSetting, seconds: u32) -> Scenario {
    Scenario {
        scheme: scheme.to_string(),
        cc: CongestionAlgorithm::Bbr,
        time_limit: 20.0 * f64::from(seconds) + 120.0,
        workload: Workload::Live(LiveWorkload {
            params: LiveParams::new(s.kbps, seconds),
            startup_delay_ms: 1000,
        }),
        link: LinkSpec {
            bw: Some(s.bw),
            rtt: s.rtt,
            loss: Some(s.loss),
            queue_bytes: Some(s.buffer),
            ..LinkSpec::default()
        },
        ..Scenario::default()
    }
}

/// A live stream of `kbps` for `seconds` over the default testbed at
/// Bernoulli loss `loss` (`art-plus-delay`'s live groups).
pub(super) fn live_scenario(scheme: &str, loss: f64, kbps: u32, seconds: u32) -> Scenario {
    live_stream(
        scheme,
        LiveSetting {
            loss,
            kbps,
            ..LIVE_BASE
        },
        seconds,
    )
}

// ---- RCP's network (rcp-*, rcp-exp4*) ----------------------------------

/// The slot length, ms (the paper counts time in slots).
pub const SLOT_MS: f64 = 1.0;
/// Bytes on the wire of one packet carrying one 100-byte message: IPv4 and
/// UDP headers (28), a short header with an 8-byte connection ID and a
/// 2-byte packet number (11), the DATAGRAM frame's type and length (3),
/// the message (100) and the AEAD tag (16), rounded up. (The dumbbell's
/// bit rate is 3 such packets per slot; the authors' channel counts
/// packets, whatever their size.)
pub const PACKET_WIRE_BYTES: f64 = 160.0;
/// The message size, bytes.
pub const MESSAGE_BYTES: u32 = 100;
/// The drain of the dumbbell variants and of Table II's `+drain` groups,
/// in units of the one-way delay: 30 x 100 slots.
pub const DRAIN_DELAYS: f64 = 30.0;

/// How the bottleneck of Table I (or Table V) is modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// The authors' channel: a slotted delay line whose buffer is the
    /// pipe, instant acknowledgements, the printed eq. 9 timer.
    Authors,
    /// artq's dumbbell: a drop-tail queue in front of the propagation
    /// delay, the same delay back, RFC 6298's timer.
    Queue,
}

/// Table I's network, with the number of slots simulated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dumbbell {
    /// Packets the bottleneck serves per slot.
    pub service: f64,
    /// One-way propagation delay, slots (the authors' channel: the least
    /// time in the buffer).
    pub delay_slots: f64,
    /// Drop probability of the bottleneck.
    pub drop: f64,
    /// Queue size, packets (the authors' channel: the whole buffer).
    pub queue: u64,
    /// Background UDP clients.
    pub background: usize,
    /// Slots during which messages are generated (one per slot per client).
    pub slots: u64,
    /// The service rate changes mid-run: `(slot, packets per slot from
    /// then on)` (Experiment 4, Table V); `None` for Table I.
    pub change: Option<(u64, f64)>,
    /// How the bottleneck is modelled.
    pub channel: Channel,
    /// Slots the run goes on after the last message's slot, for late
    /// copies to arrive; 0 ends it with the last slot (the authors' end of
    /// simulation: a message on its way then is lost).
    pub drain_slots: u64,
}

impl Dumbbell {
    /// Table I with `slots` slots of traffic over `channel`, with that
    /// channel's usual drain (none for the authors', 3000 slots for the
    /// dumbbell).
    pub fn table1(slots: u64, channel: Channel) -> Dumbbell {
        let delay_slots = 100.0;
        Dumbbell {
            service: 3.0,
            delay_slots,
            drop: 0.1,
            queue: 300,
            background: 4,
            slots,
            change: None,
            channel,
            drain_slots: default_drain(channel, delay_slots),
        }
    }

    /// The same network with a drain of `slots` slots.
    pub fn with_drain(self, slots: u64) -> Dumbbell {
        Dumbbell {
            drain_slots: slots,
            ..self
        }
    }

    fn workload(&self) -> Workload {
        // With no drain the sender closes when the last slot ends (one
        // period after the last message's), like the authors' loop.
        let drain_slots = self.drain_slots.max(1) as f64;
        Workload::Messages(MessageParams {
            messages: self.slots,
            size: MESSAGE_BYTES,
            rate: (1000.0 / SLOT_MS) as u64,
            drain_ms: (drain_slots * SLOT_MS) as u32,
        })
    }

    /// The bottleneck rate of `service` packets per slot, Mbit/s.
    fn mbps(service: f64) -> f64 {
        service * PACKET_WIRE_BYTES * 8.0 / (SLOT_MS / 1e3) / 1e6
    }

    /// The scheme name of `base` with `options` on this network: the
    /// authors' channel runs their timer (eq. 9 as printed) and their
    /// slotted sending (a slot's retransmissions leave at its start,
    /// before its new message) in the message schemes that retransmit;
    /// `tcp` takes no options.
    pub fn scheme(&self, base: &str, options: &str) -> String {
        let mut opts: Vec<&str> = options.split(',').filter(|o| !o.is_empty()).collect();
        if self.channel == Channel::Authors && matches!(base, "arq" | "rcp") {
            opts.push("rto=eq9");
            opts.push("align=slot");
        }
        if base == "tcp" || opts.is_empty() {
            base.to_string()
        } else {
            format!("{base}:{}", opts.join(","))
        }
    }

    /// The scenario of the client under test running `scheme`, beside the
    /// background UDP clients.
    pub fn scenario(&self, scheme: &str) -> Scenario {
        self.network(scheme, &[])
    }

    /// The path: the authors' channel (slotted, instant return) or the
    /// dumbbell (queue, propagation both ways). Messages travel down
    /// (server to client), acknowledgements up.
    fn link(&self) -> LinkSpec {
        let mut link = match self.channel {
            Channel::Authors => {
                let mut link = LinkSpec {
                    bw: None,
                    rtt: 0.0,
                    loss: Some(0.0),
                    queue: Some(self.queue),
                    slot_rate: Some(self.service as u64),
                    slot: SLOT_MS,
                    sojourn: self.delay_slots * SLOT_MS,
                    ..LinkSpec::default()
                };
                if let Some((slot, service)) = self.change {
                    link.slot_rate_change = format!("{}:{}", slot as f64 * SLOT_MS, service as u64)
                        .parse()
                        .ok();
                }
                link.up.instant = true;
                link
            }
            Channel::Queue => {
                let mut link = LinkSpec {
                    bw: Some(Self::mbps(self.service)),
                    rtt: 2.0 * self.delay_slots * SLOT_MS,
                    loss: Some(0.0),
                    queue: Some(self.queue),
                    ..LinkSpec::default()
                };
                if let Some((slot, service)) = self.change {
                    let at_ms = slot as f64 * SLOT_MS;
                    // Applies to the data direction only: the
                    // acknowledgements' direction has its own rate (an
                    // override) just below.
                    link.bw_change = format!("{at_ms}:{}", Self::mbps(service)).parse().ok();
                }
                // The acknowledgements' path: no capacity limit worth the name.
                link.up.bw = Some(1000.0);
                link
            }
        };
        link.down.loss = Some(self.drop);
        link
    }

    /// The scenario of the client under test running `scheme`, beside the
    /// background UDP clients and then one client per scheme of `others`
    /// (Experiment 4's clients 3-5), each sending one message per slot.
    pub fn network(&self, scheme: &str, others: &[String]) -> Scenario {
        let cc = |s: &str| {
            if s == "tcp" {
                CongestionAlgorithm::NewReno
            } else {
                CongestionAlgorithm::None
            }
        };
        // The authors' server answers every packet in the slot it arrives
        // (their acknowledgements reach the client at once): each client
        // here acknowledges every packet the moment it arrives. QUIC's
        // usual ACK every second packet, or after up to 25 ms, delays
        // each loss detection and RTT sample by up to 25 slots; on this
        // channel that alone took ARQ from 1.48-1.53 to 2.28
        // retransmissions per message and its loss from 0.030-0.033 to
        // 0.058-0.072 (seeds 1-3, docs/reproduce.md).
        let (ack_threshold, max_ack_delay) = match self.channel {
            Channel::Authors => (Some(1), Some(0.0)),
            Channel::Queue => (None, None),
        };
        Scenario {
            scheme: scheme.to_string(),
            cc: cc(scheme),
            ack_threshold,
            max_ack_delay,
            time_limit: 3600.0,
            workload: self.workload(),
            link: self.link(),
            flows: std::iter::repeat_n("udp", self.background)
                .chain(others.iter().map(String::as_str))
                .map(|s| FlowSpec {
                    scheme: s.to_string(),
                    cc: cc(s),
                    workload: self.workload(),
                })
                .collect(),
            ..Scenario::default()
        }
    }

    /// The setting in words, for reports.
    pub fn words(&self) -> String {
        let drain = if self.drain_slots == 0 {
            "the run ends with the last slot (no drain: a message not delivered by then is lost)"
                .to_string()
        } else {
            format!(
                "messages not delivered {} slots after the last one count as lost (the drain)",
                self.drain_slots
            )
        };
        let channel = match self.channel {
            Channel::Authors => format!(
                "the authors' channel: one {}-packet buffer, at most {} packets leave per slot, \
                 each after at least {} slots in it; drop probability {} before the buffer; \
                 every packet acknowledged at once and the acknowledgement back at once; eq. 9 timer as printed and retransmissions \
                 at slot starts (rto=eq9,align=slot)",
                self.queue, self.service, self.delay_slots, self.drop
            ),
            Channel::Queue => format!(
                "artq's dumbbell: a {}-packet drop-tail queue at {} packets/slot ({:.2} Mbit/s \
                 of {PACKET_WIRE_BYTES}-byte packets) before {} slots of propagation, the same \
                 delay back; drop probability {}; RFC 6298 timer",
                self.queue,
                self.service,
                Self::mbps(self.service),
                self.delay_slots,
                self.drop
            ),
        };
        format!(
            "slot {SLOT_MS} ms; {channel}; {} background UDP clients and the client under test \
             at 1 message of {MESSAGE_BYTES} bytes per slot for {} slots; no congestion control \
             except TCP (NewReno); {drain}; latencies measured (one clock)",
            self.background, self.slots
        )
    }
}

/// The usual drain of `channel`: none for the authors' (their accounting),
/// [`DRAIN_DELAYS`] one-way delays for the dumbbell (artq's).
pub fn default_drain(channel: Channel, delay_slots: f64) -> u64 {
    match channel {
        Channel::Authors => 0,
        Channel::Queue => (DRAIN_DELAYS * delay_slots) as u64,
    }
}

/// The RCP experiments' variants: the network model each runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The authors' channel, no drain (the default: the paper's numbers).
    Authors,
    /// The authors' channel with the dumbbell's drain (`-drain`).
    AuthorsDrain,
    /// artq's dumbbell with its drain (`-dumbbell`): artq's first runs.
    Dumbbell,
}

impl Variant {
    /// The suffix of its experiment names.
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Authors => "",
            Variant::AuthorsDrain => "-drain",
            Variant::Dumbbell => "-dumbbell",
        }
    }

    /// The variant an experiment name ends with.
    pub fn of(name: &str) -> Variant {
        if name.ends_with("-dumbbell") {
            Variant::Dumbbell
        } else if name.ends_with("-drain") {
            Variant::AuthorsDrain
        } else {
            Variant::Authors
        }
    }

    /// Table I (or any network) in this variant.
    pub fn net(self, slots: u64) -> Dumbbell {
        match self {
            Variant::Authors => Dumbbell::table1(slots, Channel::Authors),
            Variant::AuthorsDrain => Dumbbell::table1(slots, Channel::Authors)
                .with_drain(default_drain(Channel::Queue, 100.0)),
            Variant::Dumbbell => Dumbbell::table1(slots, Channel::Queue),
        }
    }
}

/// The RCP experiment names beyond the defaults: each figure and
/// Experiment 4 on the authors' channel with the drain, and on artq's
/// dumbbell (with its drain). Part of the registry (`experiments::experiment`).
pub const VARIANT_NAMES: &[&str] = &[
    "rcp-fig5-drain",
    "rcp-fig5-dumbbell",
    "rcp-fig7-drain",
    "rcp-fig7-dumbbell",
    "rcp-fig8-drain",
    "rcp-fig8-dumbbell",
    "rcp-fig9-drain",
    "rcp-fig9-dumbbell",
    "rcp-exp4-drain",
    "rcp-exp4-dumbbell",
];

/// The static name of `base` in `variant` (`rcp-fig5` + `-dumbbell`).
pub fn variant_name(base: &'static str, variant: Variant) -> &'static str {
    if variant == Variant::Authors {
        return base;
    }
    VARIANT_NAMES
        .iter()
        .copied()
        .find(|n| n.strip_suffix(variant.suffix()) == Some(base))
        .unwrap_or(base)
}
