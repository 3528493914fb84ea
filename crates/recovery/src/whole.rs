//! The one reader of the whole numbers in schemes' options (`fec:9`,
//! `art-fix:3`, `autorec-fixed:2`, `theta=100`, `l_queue=10`, `seed=7`,
//! `history=64`).
//!
//! Exists so that every option accepts and refuses the same spellings:
//! ASCII digits only (no sign, no `+`, no spaces, no underscores, which
//! Rust's integer parsing would partly accept), within a range. Each
//! scheme words its own error from [`WholeError`].

use std::ops::RangeInclusive;
use std::str::FromStr;

/// Why a whole number was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WholeError {
    /// Empty, or something other than ASCII digits.
    NotANumber,
    /// Digits, but outside the range (or too large for the type).
    OutOfRange,
}

/// `text` as a whole number within `range`.
pub(crate) fn whole<T>(text: &str, range: RangeInclusive<T>) -> Result<T, WholeError>
where
    T: FromStr + PartialOrd,
{
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(WholeError::NotANumber);
    }
    match text.parse::<T>() {
        Ok(v) if range.contains(&v) => Ok(v),
        _ => Err(WholeError::OutOfRange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_only_within_the_range() {
        assert_eq!(whole::<u32>("3", 1..=8), Ok(3));
        assert_eq!(whole::<u32>("0008", 1..=8), Ok(8));
        for bad in ["", "+3", "-3", " 3", "3 ", "3.0", "1_0", "x", "٣"] {
            assert_eq!(
                whole::<u32>(bad, 1..=8),
                Err(WholeError::NotANumber),
                "{bad:?}"
            );
        }
        assert_eq!(whole::<u32>("0", 1..=8), Err(WholeError::OutOfRange));
        assert_eq!(whole::<u32>("9", 1..=8), Err(WholeError::OutOfRange));
        assert_eq!(
            whole::<u32>("99999999999999999999", 0..=u32::MAX),
            Err(WholeError::OutOfRange)
        );
    }
}
