//! A DQN agent (Mnih et al. 2015) with the Double DQN target of van Hasselt
//! et al. 2016 as an option: what ART-DQN (ART journal Appendix A.2) and
//! RCP (rcp.md §IV, Table III) both train.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, D};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW, SGD};
use rand::Rng;

use crate::{Activation, LearnError, Mlp, ReplayMemory};

/// Largest model file [`Dqn::load`] reads: a network at the limits of
/// `crate::mlp::MAX_LAYER_WIDTH` is far smaller than real models, so a
/// bigger file is not one of ours, and reading it whole would let a file
/// take the process's memory.
pub const MAX_MODEL_FILE_BYTES: u64 = 64 << 20;

/// The metadata key under which [`Dqn::save_with_note`] stores its note.
pub const MODEL_NOTE_KEY: &str = "artq";

/// Most transitions a replay memory may be configured to hold.
pub const MAX_MEMORY: usize = 10_000_000;

/// One step of experience: in `state`, `action` earned `reward` and led to
/// `next_state` (`done`: the episode ended there, nothing follows).
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// The state the decision was made in.
    pub state: Vec<f32>,
    /// The action taken (an output index of the network).
    pub action: usize,
    /// The reward it earned.
    pub reward: f32,
    /// The state that followed.
    pub next_state: Vec<f32>,
    /// No state follows: the target is the reward alone.
    pub done: bool,
}

/// The exploration schedule: the probability of a random action starts at
/// `start` and is multiplied by `factor` after every `every` learning
/// steps, never going below `floor`. RCP's Table III: 0.3, x0.7 per 100.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Epsilon {
    /// Probability of exploring before any learning.
    pub start: f64,
    /// Multiplier applied every `every` learning steps.
    pub factor: f64,
    /// Learning steps between two decays (at least 1).
    pub every: u64,
    /// Lowest probability.
    pub floor: f64,
}

impl Epsilon {
    /// Never explore (a trained model, used as it is).
    pub const GREEDY: Epsilon = Epsilon {
        start: 0.0,
        factor: 1.0,
        every: 1,
        floor: 0.0,
    };

    /// The exploration probability after `learn_steps` learning steps.
    pub fn at(&self, learn_steps: u64) -> f64 {
        let decays = (learn_steps / self.every.max(1)).min(i32::MAX as u64) as i32;
        (self.start * self.factor.powi(decays)).max(self.floor)
    }
}

/// Which gradient step the agent takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerKind {
    /// Adam (no weight decay): the usual choice for DQNs, and what the
    /// papers' PyTorch and TensorFlow code used.
    Adam,
    /// Plain stochastic gradient descent.
    Sgd,
}

/// Everything that defines a DQN agent; checked by [`DqnConfig::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct DqnConfig {
    /// Values in a state.
    pub state_dim: usize,
    /// Number of actions (network outputs).
    pub actions: usize,
    /// Hidden layer widths.
    pub hidden: Vec<usize>,
    /// The nonlinearity after each hidden layer.
    pub activation: Activation,
    /// Discount factor of future rewards, in [0, 1].
    pub gamma: f64,
    /// Optimizer step size.
    pub learning_rate: f64,
    /// The optimizer.
    pub optimizer: OptimizerKind,
    /// Transitions per learning step.
    pub batch_size: usize,
    /// Transitions the replay memory holds.
    pub memory: usize,
    /// Learning steps between two target-network syncs (at least 1).
    pub target_update: u64,
    /// Exploration schedule.
    pub epsilon: Epsilon,
    /// Double DQN: the online network chooses the next action, the target
    /// network values it (less over-estimation than plain DQN's max).
    pub double: bool,
}

impl DqnConfig {
    /// Checks every value; the error says which and why.
    pub fn validate(&self) -> Result<(), LearnError> {
        let bad = |m: String| Err(LearnError::Config(m));
        if !(0.0..=1.0).contains(&self.gamma) {
            return bad(format!("discount gamma {} is outside [0, 1]", self.gamma));
        }
        if !(self.learning_rate > 0.0 && self.learning_rate <= 10.0) {
            return bad(format!(
                "learning rate {} is outside (0, 10]",
                self.learning_rate
            ));
        }
        if self.batch_size == 0 || self.batch_size > 65_536 {
            return bad(format!(
                "batch size {} is outside 1..=65536",
                self.batch_size
            ));
        }
        if self.memory < self.batch_size || self.memory > MAX_MEMORY {
            return bad(format!(
                "replay memory {} must hold at least one batch ({}) and at most {MAX_MEMORY}",
                self.memory, self.batch_size
            ));
        }
        if self.target_update == 0 {
            return bad("target update interval must be at least 1 learning step".into());
        }
        let e = &self.epsilon;
        let prob = |p: f64| (0.0..=1.0).contains(&p);
        if !prob(e.start) || !prob(e.floor) || !prob(e.factor) || e.every == 0 {
            return bad(format!(
                "epsilon schedule {e:?}: start, factor and floor must be in [0, 1], every at least 1"
            ));
        }
        if self.actions < 1 {
            return bad("a DQN needs at least one action".into());
        }
        Ok(())
    }

    /// Layer sizes of the Q-network.
    pub fn sizes(&self) -> Vec<usize> {
        let mut s = vec![self.state_dim];
        s.extend(&self.hidden);
        s.push(self.actions);
        s
    }
}

/// A DQN agent: an online Q-network trained from replayed transitions, a
/// target network synced every [`DqnConfig::target_update`] steps, and
/// epsilon-greedy acting. All randomness comes from the `rng` arguments.
pub struct Dqn {
    config: DqnConfig,
    online: Mlp,
    target: Mlp,
    optimizer: Step,
    memory: ReplayMemory<Transition>,
    learn_steps: u64,
}

impl std::fmt::Debug for Dqn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dqn")
            .field("config", &self.config)
            .field("learn_steps", &self.learn_steps)
            .field("memory", &self.memory.len())
            .finish()
    }
}

impl Dqn {
    /// A fresh agent, its networks initialised from `rng`.
    pub fn new(config: DqnConfig, rng: &mut impl Rng) -> Result<Self, LearnError> {
        config.validate()?;
        let sizes = config.sizes();
        let online = Mlp::new(&sizes, config.activation, rng)?;
        let mut target = Mlp::new(&sizes, config.activation, rng)?;
        target.copy_from(&online)?;
        let optimizer = make_optimizer(&config, &online)?;
        let memory = ReplayMemory::new(config.memory);
        Ok(Self {
            config,
            online,
            target,
            optimizer,
            memory,
            learn_steps: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &DqnConfig {
        &self.config
    }

    /// Learning steps taken so far.
    pub fn learn_steps(&self) -> u64 {
        self.learn_steps
    }

    /// The current exploration probability.
    pub fn epsilon(&self) -> f64 {
        self.config.epsilon.at(self.learn_steps)
    }

    /// Transitions remembered.
    pub fn memory_len(&self) -> usize {
        self.memory.len()
    }

    /// The online network's value of every action in `state`.
    pub fn q_values(&self, state: &[f32]) -> Result<Vec<f32>, LearnError> {
        let x = self.batch(&[state])?;
        Ok(self.online.forward(&x)?.squeeze(0)?.to_vec1::<f32>()?)
    }

    /// The action of highest value in `state` (the lowest index on ties).
    pub fn greedy(&self, state: &[f32]) -> Result<usize, LearnError> {
        let q = self.q_values(state)?;
        Ok(argmax(&q))
    }

    /// Epsilon-greedy: a uniformly random action with the current
    /// exploration probability, else [`Dqn::greedy`].
    pub fn act(&self, state: &[f32], rng: &mut impl Rng) -> Result<usize, LearnError> {
        if rng.gen_bool(self.epsilon().clamp(0.0, 1.0)) {
            Ok(rng.gen_range(0..self.config.actions))
        } else {
            self.greedy(state)
        }
    }

    /// Remember a transition for replay.
    pub fn remember(&mut self, t: Transition) -> Result<(), LearnError> {
        self.check_state(&t.state)?;
        self.check_state(&t.next_state)?;
        if t.action >= self.config.actions {
            return Err(LearnError::Config(format!(
                "action {} is not one of the {} actions",
                t.action, self.config.actions
            )));
        }
        self.memory.push(t);
        Ok(())
    }

    /// One learning step over a minibatch drawn from the replay memory:
    /// returns the loss (mean squared TD error) before the step, or `None`
    /// while the memory holds less than a batch.
    pub fn learn(&mut self, rng: &mut impl Rng) -> Result<Option<f32>, LearnError> {
        let Some(batch) = self.memory.sample(self.config.batch_size, rng) else {
            return Ok(None);
        };
        let n = batch.len();
        let states: Vec<&[f32]> = batch.iter().map(|t| t.state.as_slice()).collect();
        let nexts: Vec<&[f32]> = batch.iter().map(|t| t.next_state.as_slice()).collect();
        let s = self.batch(&states)?;
        let s2 = self.batch(&nexts)?;
        let actions: Vec<u32> = batch.iter().map(|t| t.action as u32).collect();
        let a = Tensor::from_vec(actions, (n, 1), &Device::Cpu)?;
        let rewards: Vec<f32> = batch.iter().map(|t| t.reward).collect();
        let r = Tensor::from_vec(rewards, n, &Device::Cpu)?;
        let alive: Vec<f32> = batch
            .iter()
            .map(|t| if t.done { 0.0 } else { 1.0 })
            .collect();
        let alive = Tensor::from_vec(alive, n, &Device::Cpu)?;

        // The bootstrap value of the next state, without gradients.
        let next_target = self.target.forward(&s2)?.detach();
        let next_value = if self.config.double {
            let choice = self
                .online
                .forward(&s2)?
                .detach()
                .argmax_keepdim(D::Minus1)?;
            next_target.gather(&choice, 1)?.squeeze(1)?
        } else {
            next_target.max(D::Minus1)?
        };
        let y = (r + (next_value * alive)?.affine(self.config.gamma, 0.0)?)?.detach();

        let q = self.online.forward(&s)?.gather(&a, 1)?.squeeze(1)?;
        let loss = candle_nn::loss::mse(&q, &y)?;
        let value = loss.to_scalar::<f32>()?;
        self.optimizer.backward_step(&loss)?;
        self.learn_steps += 1;
        if self.learn_steps % self.config.target_update == 0 {
            self.target.copy_from(&self.online)?;
        }
        Ok(Some(value))
    }

    /// Copy the online network into the target network now.
    pub fn sync_target(&mut self) -> Result<(), LearnError> {
        self.target.copy_from(&self.online)
    }

    /// Whether the target network's outputs equal the online network's for
    /// `state` (right after a sync they do).
    pub fn target_matches(&self, state: &[f32]) -> Result<bool, LearnError> {
        let x = self.batch(&[state])?;
        let a = self.online.forward(&x)?.to_vec2::<f32>()?;
        let b = self.target.forward(&x)?.to_vec2::<f32>()?;
        Ok(a == b)
    }

    /// Write the online network to `path` as a safetensors file.
    pub fn save(&self, path: &Path) -> Result<(), LearnError> {
        self.save_with_note(path, None)
    }

    /// Write the online network to `path` as a safetensors file with
    /// `note` (if any) stored under the metadata key [`MODEL_NOTE_KEY`]:
    /// what the model was trained as, so that its user need not repeat it.
    /// One key only, so the file is the same bytes for the same network.
    pub fn save_with_note(&self, path: &Path, note: Option<&str>) -> Result<(), LearnError> {
        let tensors = self.online.named_tensors();
        let mut sorted: Vec<(String, Tensor)> = tensors.into_iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let metadata = note.map(|n| {
            std::collections::HashMap::from([(MODEL_NOTE_KEY.to_string(), n.to_string())])
        });
        safetensors::serialize_to_file(sorted, metadata, path).map_err(|e| LearnError::Mismatch {
            path: path.to_owned(),
            reason: format!("cannot write the model: {e}"),
        })
    }

    /// Replace both networks by the model in `path` (written by
    /// [`Dqn::save`] for the same layer sizes). The replay memory and the
    /// optimizer state start afresh; the learning-step count (and so the
    /// exploration schedule) is kept. Returns the file's note (see
    /// [`Dqn::save_with_note`]), if it has one.
    pub fn load(&mut self, path: &Path) -> Result<Option<String>, LearnError> {
        let bytes = read_model_file(path)?;
        let mismatch = |reason: String| LearnError::Mismatch {
            path: path.to_owned(),
            reason,
        };
        let tensors: HashMap<String, Tensor> =
            candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
                .map_err(|e| mismatch(format!("not a safetensors model: {e}")))?;
        self.online.set_named_tensors(&tensors, mismatch)?;
        self.target.copy_from(&self.online)?;
        self.optimizer = make_optimizer(&self.config, &self.online)?;
        Ok(note_of(&bytes))
    }

    /// Replace both networks by a copy of `other`'s online network (of the
    /// same layer sizes), as [`Dqn::load`] does from a file: the replay
    /// memory and optimizer state start afresh. For a trained network used
    /// by several independent runs, each from the same weights.
    pub fn copy_weights(&mut self, other: &Dqn) -> Result<(), LearnError> {
        if other.config.sizes() != self.config.sizes() {
            return Err(LearnError::Config(format!(
                "cannot copy a {:?} network into a {:?} one",
                other.config.sizes(),
                self.config.sizes()
            )));
        }
        self.online.copy_from(&other.online)?;
        self.target.copy_from(&self.online)?;
        self.optimizer = make_optimizer(&self.config, &self.online)?;
        Ok(())
    }

    fn check_state(&self, state: &[f32]) -> Result<(), LearnError> {
        if state.len() != self.config.state_dim {
            return Err(LearnError::Config(format!(
                "a state has {} values, this network takes {}",
                state.len(),
                self.config.state_dim
            )));
        }
        if state.iter().any(|v| !v.is_finite()) {
            return Err(LearnError::Config(format!(
                "a state holds a value that is not finite: {state:?}"
            )));
        }
        Ok(())
    }

    fn batch(&self, states: &[&[f32]]) -> Result<Tensor, LearnError> {
        let mut flat = Vec::with_capacity(states.len() * self.config.state_dim);
        for s in states {
            self.check_state(s)?;
            flat.extend_from_slice(s);
        }
        Ok(
            Tensor::from_vec(flat, (states.len(), self.config.state_dim), &Device::Cpu)?
                .to_dtype(DType::F32)?,
        )
    }
}

/// The optimizer of a [`Dqn`] (candle's optimizers are not object-safe).
enum Step {
    Adam(AdamW),
    Sgd(SGD),
}

impl Step {
    fn backward_step(&mut self, loss: &Tensor) -> Result<(), LearnError> {
        match self {
            Step::Adam(o) => o.backward_step(loss)?,
            Step::Sgd(o) => o.backward_step(loss)?,
        }
        Ok(())
    }
}

fn make_optimizer(config: &DqnConfig, net: &Mlp) -> Result<Step, LearnError> {
    Ok(match config.optimizer {
        OptimizerKind::Adam => Step::Adam(AdamW::new(
            net.vars(),
            ParamsAdamW {
                lr: config.learning_rate,
                weight_decay: 0.0,
                ..ParamsAdamW::default()
            },
        )?),
        OptimizerKind::Sgd => Step::Sgd(SGD::new(net.vars(), config.learning_rate)?),
    })
}

/// The bytes of the model file at `path`, refused when larger than
/// [`MAX_MODEL_FILE_BYTES`].
fn read_model_file(path: &Path) -> Result<Vec<u8>, LearnError> {
    let io = |source| LearnError::Io {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > MAX_MODEL_FILE_BYTES {
        return Err(LearnError::TooLarge {
            path: path.to_owned(),
            size,
            limit: MAX_MODEL_FILE_BYTES,
        });
    }
    std::fs::read(path).map_err(io)
}

/// The note of a model file's bytes (see [`Dqn::save_with_note`]).
fn note_of(bytes: &[u8]) -> Option<String> {
    let (_, metadata) = safetensors::SafeTensors::read_metadata(bytes).ok()?;
    metadata.metadata().as_ref()?.get(MODEL_NOTE_KEY).cloned()
}

/// The note of the model file at `path` (see [`Dqn::save_with_note`]):
/// `Ok(None)` for a model without one. For callers that need a model's
/// training options before building the network that loads it.
pub fn model_note(path: &Path) -> Result<Option<String>, LearnError> {
    let bytes = read_model_file(path)?;
    safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| LearnError::Mismatch {
        path: path.to_owned(),
        reason: format!("not a safetensors model: {e}"),
    })?;
    Ok(note_of(&bytes))
}

/// Index of the largest value (the first on ties; NaN never wins).
fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] || values[best].is_nan() {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests;
