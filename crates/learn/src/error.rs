//! What can go wrong when building, training, saving or loading a learner.

use std::path::PathBuf;

/// A learner's error: a bad configuration, a model file that cannot be
/// used, or a failure inside the tensor library.
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    /// A configuration value is out of range (which and why).
    #[error("invalid learner configuration: {0}")]
    Config(String),
    /// The model file cannot be read or written.
    #[error("model file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The model file is larger than any model this crate builds.
    #[error("model file {}: {size} bytes is more than the {limit} a model may have", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit ([`crate::MAX_MODEL_FILE_BYTES`]).
        limit: u64,
    },
    /// The model file is not a safetensors file, or not one of this network:
    /// a tensor is missing, has another shape, or is not expected.
    #[error("model file {}: {reason}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// An error inside candle (shapes, dtypes): a bug if it ever shows.
    #[error("tensor operation failed: {0}")]
    Tensor(#[from] candle_core::Error),
}
