//! The learners behind artq's learning recovery policies.
//!
//! Two of our papers learn their decisions: ART-DQN (ART journal §8,
//! Appendix A.2) chooses a redundancy level from the path's state, and RCP
//! (`rcp.md`) decides per timed-out message whether to retransmit or drop,
//! with a Double DQN. Both need the same machinery, which lives here once:
//!
//! - [`Mlp`]: a small fully connected network (the Q-function), on
//!   [candle](https://github.com/huggingface/candle) (CPU): gradients come
//!   from candle's autograd, not from hand-written backpropagation;
//! - [`ReplayMemory`]: a bounded experience replay buffer;
//! - [`Dqn`]: the agent (epsilon-greedy acting, learning from sampled
//!   minibatches, a target network, plain or Double DQN targets);
//! - models saved and loaded as safetensors files ([`Dqn::save`],
//!   [`Dqn::load`]), with an error that names the file and what is wrong
//!   when it is missing, too large, or made for another network.
//!
//! Everything random (initial weights, exploration, replay sampling) is
//! drawn from a caller-seeded [`rand_chacha::ChaCha8Rng`]: a training run
//! with a seed is repeatable bit for bit on one machine. Like the other
//! core crates, this one never reads a clock or the OS RNG.

mod dqn;
mod error;
mod mlp;
mod replay;

pub use dqn::{
    model_note, Dqn, DqnConfig, Epsilon, OptimizerKind, Transition, MAX_MODEL_FILE_BYTES,
    MODEL_NOTE_KEY,
};
pub use error::LearnError;
pub use mlp::{Activation, Mlp};
pub use replay::ReplayMemory;
