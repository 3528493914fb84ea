//! The error every scheme's configuration returns: a leaf module below the
//! schemes and the registry, so that a scheme names its errors without
//! importing the registry that imports every scheme.

/// An unknown or malformed scheme name, or unusable scheme parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    /// No scheme has this name.
    #[error("unknown recovery scheme '{name}' (available: {available})")]
    Unknown {
        /// The name given.
        name: String,
        /// The accepted names, comma separated.
        available: String,
    },
    /// A known scheme with a missing, extra or bad parameter.
    #[error("bad recovery scheme '{name}': {reason}; the form is {form}")]
    BadParameter {
        /// The name given.
        name: String,
        /// What is wrong.
        reason: String,
        /// The valid form, e.g. `fixed:R with R an integer in 1..=32`.
        form: String,
    },
    /// A scheme of the papers that this build does not provide.
    #[error("recovery scheme '{name}' is not implemented yet: {reason}")]
    NotImplemented {
        /// The name given.
        name: String,
        /// Why.
        reason: String,
    },
    /// Programmatic configuration out of range.
    #[error("invalid configuration for recovery scheme '{scheme}': {reason}")]
    InvalidConfig {
        /// The scheme configured.
        scheme: String,
        /// What is wrong.
        reason: String,
    },
}
