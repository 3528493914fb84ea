//! [`Routes`]: which links a datagram crosses, by its source and
//! destination, and where it goes after each hop.
//!
//! Every datagram asks once per hop. The table is a hash map of address
//! pairs (never iterated), but hashing two socket addresses and probing
//! the map was most of the simulator's forwarding cost (perf: `forward`
//! at 1.7-2.3% of a bulk transfer, most of it the lookup). Consecutive
//! datagrams leaving the same node or the same link nearly always belong
//! to the same pair, so each node and each link remembers its last answer
//! and asks the map only when the pair differs. The memory is an
//! optimisation only: it is dropped whenever a route changes, and the
//! answer is the map's either way.

use std::net::SocketAddr;

use rustc_hash::FxHashMap;

/// What a datagram is leaving when it asks for its next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Leaving {
    /// Just sent by node `n`.
    Node(usize),
    /// Just out of link `l`.
    Link(usize),
}

/// The next hop of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hop {
    /// Link `l` comes next.
    Link(usize),
    /// The route ends here: deliver to the destination's node.
    Deliver,
    /// No route for the pair, or the datagram came out of a link its
    /// route no longer holds (the route changed while it was in flight).
    Unrouted,
}

/// One remembered answer: the pair and its next hop from one place.
#[derive(Clone, Copy, Debug)]
struct Memo {
    src: SocketAddr,
    dst: SocketAddr,
    hop: Hop,
}

/// The route table with each node's and link's last answer (module doc).
#[derive(Debug, Default)]
pub(super) struct Routes {
    /// Each (source, destination) pair's links, in order.
    paths: FxHashMap<(SocketAddr, SocketAddr), Vec<usize>>,
    /// Last answer for a datagram leaving node `n` (index `n`).
    from_node: Vec<Option<Memo>>,
    /// Last answer for a datagram leaving link `l` (index `l`).
    from_link: Vec<Option<Memo>>,
}

impl Routes {
    /// Datagrams from `src` to `dst` cross `links` in order (none: they
    /// are delivered at once). Replaces an earlier route for the pair.
    pub(super) fn set(&mut self, src: SocketAddr, dst: SocketAddr, links: Vec<usize>) {
        self.paths.insert((src, dst), links);
        self.from_node.clear();
        self.from_link.clear();
    }

    /// The next hop of a datagram from `src` to `dst` at `from`.
    pub(super) fn next(&mut self, src: SocketAddr, dst: SocketAddr, from: Leaving) -> Hop {
        let memo = match from {
            Leaving::Node(n) => slot(&mut self.from_node, n),
            Leaving::Link(l) => slot(&mut self.from_link, l),
        };
        if let Some(Some(m)) = memo.as_deref() {
            if m.src == src && m.dst == dst {
                return m.hop;
            }
        }
        let hop = match self.paths.get(&(src, dst)) {
            None => Hop::Unrouted,
            Some(path) => {
                let at = match from {
                    Leaving::Node(_) => Some(0),
                    Leaving::Link(l) => path.iter().position(|&hop| hop == l).map(|i| i + 1),
                };
                match at {
                    None => Hop::Unrouted,
                    Some(i) => path.get(i).map_or(Hop::Deliver, |&l| Hop::Link(l)),
                }
            }
        };
        if let Some(memo) = memo {
            *memo = Some(Memo { src, dst, hop });
        }
        hop
    }
}

/// Entry `i` of `memos`, grown to hold it; `None` only if `i` is absurdly
/// large (a node or link index always fits).
fn slot(memos: &mut Vec<Option<Memo>>, i: usize) -> Option<&mut Option<Memo>> {
    if memos.len() <= i {
        memos.resize(i.checked_add(1)?, None);
    }
    memos.get_mut(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    /// What the table alone says, without any memory.
    fn fresh(routes: &Routes, src: SocketAddr, dst: SocketAddr, from: Leaving) -> Hop {
        let mut copy = Routes {
            paths: routes.paths.clone(),
            ..Routes::default()
        };
        copy.next(src, dst, from)
    }

    #[test]
    fn answers_as_the_table_does_through_changes() {
        let (a, b, c) = (addr(1), addr(2), addr(3));
        let mut routes = Routes::default();
        routes.set(a, b, vec![0, 1]);
        routes.set(b, a, vec![]);
        let asks = [
            (a, b, Leaving::Node(0)),
            (a, b, Leaving::Link(0)),
            (a, b, Leaving::Link(1)),
            (a, b, Leaving::Link(2)),
            (b, a, Leaving::Node(1)),
            (a, c, Leaving::Node(0)),
            (a, b, Leaving::Node(0)),
        ];
        for round in 0..3 {
            for &(src, dst, from) in &asks {
                let want = fresh(&routes, src, dst, from);
                assert_eq!(routes.next(src, dst, from), want, "{src} {dst} {from:?}");
                // Asked again: the memory answers, and must agree.
                assert_eq!(routes.next(src, dst, from), want, "{src} {dst} {from:?}");
            }
            // A route changes between rounds: no stale answer survives.
            match round {
                0 => routes.set(a, b, vec![1]),
                _ => routes.set(a, c, vec![0]),
            }
        }
        assert_eq!(routes.next(a, b, Leaving::Node(0)), Hop::Link(1));
        assert_eq!(routes.next(a, b, Leaving::Link(0)), Hop::Unrouted);
        assert_eq!(routes.next(a, b, Leaving::Link(1)), Hop::Deliver);
        assert_eq!(routes.next(b, a, Leaving::Node(1)), Hop::Deliver);
        assert_eq!(routes.next(c, a, Leaving::Node(2)), Hop::Unrouted);
    }
}
