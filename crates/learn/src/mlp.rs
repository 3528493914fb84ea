//! A small fully connected network: the Q-function of a DQN.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use rand::Rng;

use crate::LearnError;

/// Widest layer a network may have, and most layers: far beyond what a
/// recovery policy needs, small enough that a configuration typo cannot
/// allocate gigabytes.
pub const MAX_LAYER_WIDTH: usize = 4096;
/// Most layers (weight matrices) of a network.
pub const MAX_LAYERS: usize = 16;

/// The nonlinearity after each hidden layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// max(0, x): the usual choice.
    Relu,
    /// 1 / (1 + e^-x): RCP's network (rcp.md Fig. 3; its published code
    /// applies it after both hidden layers).
    Sigmoid,
}

/// A multilayer perceptron with an [`Activation`] after each hidden layer
/// and a linear output: `sizes = [inputs, hidden..., outputs]`. Its
/// parameters are candle [`Var`]s, so an optimizer can train them through
/// autograd.
#[derive(Debug)]
pub struct Mlp {
    sizes: Vec<usize>,
    activation: Activation,
    /// (weight `[out, in]`, bias `[out]`) per layer.
    layers: Vec<(Var, Var)>,
}

impl Mlp {
    /// A network of the given layer sizes, its parameters drawn from `rng`
    /// as PyTorch's `nn.Linear` draws them (uniform in ±1/sqrt(fan_in) for
    /// weights and biases), since the papers' learners were written in
    /// PyTorch or TensorFlow with their default initialisation.
    pub fn new(
        sizes: &[usize],
        activation: Activation,
        rng: &mut impl Rng,
    ) -> Result<Self, LearnError> {
        check_sizes(sizes)?;
        let mut layers = Vec::with_capacity(sizes.len() - 1);
        for pair in sizes.windows(2) {
            let (fan_in, fan_out) = (pair[0], pair[1]);
            let bound = 1.0 / (fan_in as f32).sqrt();
            let mut draw =
                |n: usize| -> Vec<f32> { (0..n).map(|_| rng.gen_range(-bound..=bound)).collect() };
            let w = Tensor::from_vec(draw(fan_in * fan_out), (fan_out, fan_in), &Device::Cpu)?;
            let b = Tensor::from_vec(draw(fan_out), fan_out, &Device::Cpu)?;
            layers.push((Var::from_tensor(&w)?, Var::from_tensor(&b)?));
        }
        Ok(Self {
            sizes: sizes.to_vec(),
            activation,
            layers,
        })
    }

    /// The layer sizes, inputs first.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// Number of inputs.
    pub fn inputs(&self) -> usize {
        self.sizes[0]
    }

    /// Number of outputs.
    pub fn outputs(&self) -> usize {
        self.sizes[self.sizes.len() - 1]
    }

    /// The outputs for a batch of inputs `[batch, inputs]`: `[batch, outputs]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, LearnError> {
        let mut h = x.clone();
        let last = self.layers.len() - 1;
        for (i, (w, b)) in self.layers.iter().enumerate() {
            h = h
                .matmul(&w.as_tensor().t()?)?
                .broadcast_add(b.as_tensor())?;
            if i != last {
                h = match self.activation {
                    Activation::Relu => h.relu()?,
                    Activation::Sigmoid => candle_nn::ops::sigmoid(&h)?,
                };
            }
        }
        Ok(h)
    }

    /// The trainable parameters, for an optimizer.
    pub fn vars(&self) -> Vec<Var> {
        self.layers
            .iter()
            .flat_map(|(w, b)| [w.clone(), b.clone()])
            .collect()
    }

    /// Make this network's parameters equal to `other`'s (the target
    /// network's periodic sync). Both must have the same sizes.
    pub fn copy_from(&mut self, other: &Mlp) -> Result<(), LearnError> {
        if self.sizes != other.sizes {
            return Err(LearnError::Config(format!(
                "cannot copy a {:?} network into a {:?} one",
                other.sizes, self.sizes
            )));
        }
        for ((w, b), (ow, ob)) in self.layers.iter().zip(&other.layers) {
            w.set(&ow.as_tensor().copy()?)?;
            b.set(&ob.as_tensor().copy()?)?;
        }
        Ok(())
    }

    /// The parameters by name (`layer{i}.weight`, `layer{i}.bias`), as a
    /// model file stores them.
    pub fn named_tensors(&self) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for (i, (w, b)) in self.layers.iter().enumerate() {
            out.insert(format!("layer{i}.weight"), w.as_tensor().clone());
            out.insert(format!("layer{i}.bias"), b.as_tensor().clone());
        }
        out
    }

    /// Set the parameters from named tensors (a loaded model file): every
    /// name must be present, with this network's shape and f32 values, and
    /// nothing else. `mismatch` turns a reason into the caller's error.
    pub fn set_named_tensors(
        &mut self,
        tensors: &HashMap<String, Tensor>,
        mismatch: impl Fn(String) -> LearnError,
    ) -> Result<(), LearnError> {
        let expected = self.named_tensors();
        if let Some(extra) = tensors.keys().filter(|k| !expected.contains_key(*k)).min() {
            return Err(mismatch(format!(
                "unexpected tensor `{extra}`: not a model of a {:?} network",
                self.sizes
            )));
        }
        let mut names: Vec<&String> = expected.keys().collect();
        names.sort();
        if let Some(name) = names.iter().find(|n| !tensors.contains_key(**n)) {
            return Err(mismatch(format!(
                "tensor `{name}` missing: not a model of a {:?} network",
                self.sizes
            )));
        }
        for name in &names {
            let (want, got) = (&expected[*name], &tensors[*name]);
            if got.dims() != want.dims() || got.dtype() != DType::F32 {
                return Err(mismatch(format!(
                    "tensor `{name}` is {:?} {:?}, this {:?} network needs {:?} F32",
                    got.dtype(),
                    got.dims(),
                    self.sizes,
                    want.dims()
                )));
            }
        }
        for (i, (w, b)) in self.layers.iter().enumerate() {
            w.set(&tensors[&format!("layer{i}.weight")])?;
            b.set(&tensors[&format!("layer{i}.bias")])?;
        }
        Ok(())
    }
}

fn check_sizes(sizes: &[usize]) -> Result<(), LearnError> {
    if sizes.len() < 2 || sizes.len() > MAX_LAYERS + 1 {
        return Err(LearnError::Config(format!(
            "a network needs an input and an output size and at most {MAX_LAYERS} layers, got sizes {sizes:?}"
        )));
    }
    if let Some(bad) = sizes.iter().find(|&&n| n == 0 || n > MAX_LAYER_WIDTH) {
        return Err(LearnError::Config(format!(
            "layer size {bad} is outside 1..={MAX_LAYER_WIDTH} (sizes {sizes:?})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn shapes_follow_the_sizes() {
        let net = Mlp::new(
            &[5, 16, 16, 3],
            Activation::Relu,
            &mut ChaCha8Rng::seed_from_u64(1),
        )
        .unwrap();
        let x = Tensor::zeros((7, 5), DType::F32, &Device::Cpu).unwrap();
        assert_eq!(net.forward(&x).unwrap().dims(), &[7, 3]);
        assert_eq!(net.vars().len(), 6);
        assert_eq!(net.named_tensors()["layer1.weight"].dims(), &[16, 16]);
        for bad in [&[][..], &[4][..], &[4, 0, 2][..], &[4, 5000, 2][..]] {
            assert!(
                Mlp::new(bad, Activation::Relu, &mut ChaCha8Rng::seed_from_u64(1)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn initialisation_is_seeded_and_bounded() {
        let weights = |seed| {
            let net = Mlp::new(
                &[4, 8, 2],
                Activation::Sigmoid,
                &mut ChaCha8Rng::seed_from_u64(seed),
            )
            .unwrap();
            net.named_tensors()["layer0.weight"]
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        assert_eq!(weights(3), weights(3));
        assert_ne!(weights(3), weights(4));
        assert!(weights(3).iter().all(|w| w.abs() <= 0.5));
    }

    #[test]
    fn copy_from_makes_outputs_equal() {
        let a = Mlp::new(
            &[3, 8, 2],
            Activation::Sigmoid,
            &mut ChaCha8Rng::seed_from_u64(1),
        )
        .unwrap();
        let mut b = Mlp::new(
            &[3, 8, 2],
            Activation::Sigmoid,
            &mut ChaCha8Rng::seed_from_u64(2),
        )
        .unwrap();
        let x = Tensor::new(&[[0.1f32, -0.4, 0.9]], &Device::Cpu).unwrap();
        let out = |n: &Mlp| n.forward(&x).unwrap().to_vec2::<f32>().unwrap();
        assert_ne!(out(&a), out(&b));
        b.copy_from(&a).unwrap();
        assert_eq!(out(&a), out(&b));
        let mut c = Mlp::new(
            &[3, 4, 2],
            Activation::Sigmoid,
            &mut ChaCha8Rng::seed_from_u64(2),
        )
        .unwrap();
        assert!(c.copy_from(&a).is_err());
    }
}
