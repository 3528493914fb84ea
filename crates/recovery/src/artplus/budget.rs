//! `art+`'s explicit redundancy budget: the cost constraint C of the ART
//! journal's eq. 4, which ART states and never enforces.
//!
//! Every packet declared lost earns `per_loss` tokens (plain QUIC's cost is
//! one retransmission per loss, so the budget is a share of QUIC's cost);
//! every replica beyond the first of a round spends one. Tokens are capped,
//! so a quiet period does not bank a flood, and the upper half of the cap
//! is the only part data that does not block the receiver may spend: what
//! is left is kept for data that does (docs/recovery.md, `art+`).

/// Tokens a fresh connection starts with: enough for the first blocking
/// losses before any loss has earned anything.
pub const INITIAL_TOKENS: f64 = 4.0;

/// Most tokens held.
pub const MAX_TOKENS: f64 = 64.0;

/// The budget of extra replicas.
#[derive(Clone, Debug)]
pub struct Budget {
    per_loss: f64,
    tokens: f64,
    earned: f64,
    spent: u64,
}

impl Budget {
    /// A budget earning `per_loss` extra replicas per lost packet (finite,
    /// at least 0).
    pub fn new(per_loss: f64) -> Self {
        Budget {
            per_loss: if per_loss.is_finite() {
                per_loss.max(0.0)
            } else {
                0.0
            },
            tokens: INITIAL_TOKENS,
            earned: INITIAL_TOKENS,
            spent: 0,
        }
    }

    /// A packet was declared lost.
    pub fn on_loss(&mut self) {
        let before = self.tokens;
        self.tokens = (self.tokens + self.per_loss).min(MAX_TOKENS);
        self.earned += self.tokens - before;
    }

    /// Grant up to `want` extra replicas: all the tokens allow for data
    /// that blocks the receiver, only what lies above half the cap for
    /// other data.
    pub fn grant(&mut self, want: u32, blocking: bool) -> u32 {
        let floor = if blocking { 0.0 } else { MAX_TOKENS / 2.0 };
        let spendable = (self.tokens - floor).max(0.0).floor();
        // Float to integer casts saturate; spendable ≤ MAX_TOKENS.
        let granted = want.min(spendable as u32);
        self.tokens -= f64::from(granted);
        self.spent += u64::from(granted);
        granted
    }

    /// Tokens held.
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Extra replicas granted so far.
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// Tokens earned so far, the initial ones included: `spent` never
    /// exceeds it.
    pub fn earned(&self) -> f64 {
        self.earned
    }
}
