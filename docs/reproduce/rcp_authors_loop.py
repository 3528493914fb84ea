"""The slot loop of the RCP authors' simulator, re-written from its
description (github.com/qizhu8/DRL-RCP-py, Ver2/: SimulationEnvironment2.py,
channel.py, channelBuffer.py, protocols/window_arq_v2.py,
protocols/baseTransportLayerProtocol.py) to estimate how much their Table II
figures vary from run to run, and to see what the order of a slot's packets
does. Not their code: only the semantics docs/reproduce.md ("RCP") lists.

    python3 rcp_authors_loop.py            # ARQ, 3 seeds, both orders
    python3 rcp_authors_loop.py udp

Per slot: the channel's clients (four background UDP, one under test) are
asked in a random order; each client's packets (an ARQ client's timed-out
retransmissions, then its new message) are offered one after the other; a
packet is dropped with probability 0.1, else dropped if the buffer holds
300, else queued; then at most 3 packets that have stayed 100 slots leave,
oldest first. The server answers each packet in the next slot, and the
answer reaches the client at once. The buffer is filled by the background
clients before slot 1, as theirs is. ARQ's timer is eq. 9 as printed
(RTTVAR <- 3/4 RTTVAR + 1/4 |RTTVAR - rtt|), starting from SRTT = RTTVAR = 1
and a timeout of 30 slots. A message not delivered when the run ends is lost.
"""
import collections
import random
import sys

BUFFER, RATE, SOJOURN, DROP = 300, 3, 100, 0.1


def run(seed, scheme="arq", slots=20000, per_packet_order=False):
    rng = random.Random(seed)
    buf = collections.deque()
    t = 0
    while len(buf) < BUFFER:  # their prefill, then the clock restarts at 0
        t += 1
        for _ in range(4):
            if rng.random() >= DROP and len(buf) < BUFFER:
                buf.append((t, None))
    t = 0
    srtt, rttvar, timeout = 1.0, 1.0, 30.0
    window = {}  # message -> [generated, last sent]
    delivered, sent_copies, generated = {}, 0, 0
    arrived = []  # what left the channel last slot
    for loop in range(1, slots + 1):
        now = loop - 1  # the clients' and the server's clock
        acks = []
        for _, pkt in arrived:
            if pkt is not None:
                msg, gen = pkt
                delivered.setdefault(msg, now - gen)
                acks.append(msg)
        arrived = []
        offered = []
        for client in rng.sample(range(5), 5):
            if client < 4:
                if now > 0:
                    offered.append(None)
                continue
            out = []
            if scheme == "arq":
                for msg in acks:
                    if msg in window:
                        rtt = now - window[msg][1]
                        rttvar = 0.75 * rttvar + 0.25 * abs(rttvar - rtt)
                        srtt = 0.875 * srtt + 0.125 * rtt
                        timeout = srtt + max(1, 4 * rttvar)
                        del window[msg]
                for msg, entry in window.items():
                    if entry[1] <= now - timeout:
                        out.append((msg, entry[0]))
                        entry[1] = now
                        sent_copies += 1
            if now > 0:
                if scheme == "arq":
                    window[generated] = [now, now]
                out.append((generated, now))
                generated += 1
            offered.extend(out)
        if per_packet_order:
            rng.shuffle(offered)
        t += 1
        for pkt in offered:
            if rng.random() < DROP:
                continue
            if len(buf) < BUFFER:
                buf.append((t, pkt))
        served = 0
        while served < RATE and buf and t - buf[0][0] >= SOJOURN:
            arrived.append(buf.popleft())
            served += 1
    eps = 1 - len(delivered) / generated
    latency = sum(delivered.values()) / len(delivered)
    return eps, latency, sent_copies / generated


if __name__ == "__main__":
    scheme = sys.argv[1] if len(sys.argv) > 1 else "arq"
    for per_packet in (False, True):
        order = "packets one by one" if per_packet else "each client's as a block"
        for seed in range(3):
            eps, l, retx = run(seed, scheme, per_packet_order=per_packet)
            print(f"{scheme} seed {seed}, {order}: epsilon {eps:.3f}, "
                  f"l {l:.1f} slots, {retx:.2f} retransmissions per message")
