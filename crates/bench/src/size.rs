//! Sizes as DESIGN.md writes them: `1048576`, `200KB`, `1MB`, `1GiB`.
//!
//! Why here: the benchmark's `--size` takes the same spelling as the artq CLI's
//! workload options, powers of 1000 for `KB/MB/GB` and of 1024 for
//! `KiB/MiB/GiB`. Parsing is checked: no input can overflow or panic.

use thiserror::Error;

/// Why a size string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeError {
    /// No leading digits (`""`, `"MB"`, `"-1"`).
    #[error("size {0:?} does not start with a number")]
    NoNumber(String),
    /// A suffix other than B, KB, MB, GB, TB, KiB, MiB, GiB, TiB.
    #[error("size {0:?} has an unknown unit (use B, KB, MB, GB, KiB, MiB or GiB)")]
    UnknownUnit(String),
    /// The value does not fit in 64 bits.
    #[error("size {0:?} is too large")]
    Overflow(String),
}

/// Units and their multipliers, decimal then binary.
const UNITS: [(&str, u64); 9] = [
    ("", 1),
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
];

/// Parses a size in bytes: an integer with an optional unit suffix.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    if number.is_empty() {
        return Err(SizeError::NoNumber(text.to_string()));
    }
    let unit = unit.trim_start();
    let mult = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, m)| *m)
        .ok_or_else(|| SizeError::UnknownUnit(text.to_string()))?;
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| SizeError::Overflow(text.to_string()))
}

/// Formats a byte count for humans, in the largest binary unit that divides
/// it exactly (`1 GiB`, `20000000 B`): the output always parses back to `bytes`.
pub fn format_size(bytes: u64) -> String {
    for (name, mult) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= mult && bytes % mult == 0 {
            return format!("{} {name}", bytes / mult);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_design_md_spellings() {
        assert_eq!(parse_size("1048576"), Ok(1_048_576));
        assert_eq!(parse_size("200KB"), Ok(200_000));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("64 KiB"), Ok(65_536));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(matches!(parse_size(""), Err(SizeError::NoNumber(_))));
        assert!(matches!(parse_size("MB"), Err(SizeError::NoNumber(_))));
        assert!(matches!(parse_size("-1"), Err(SizeError::NoNumber(_))));
        assert!(matches!(
            parse_size("1.5GB"),
            Err(SizeError::UnknownUnit(_))
        ));
        assert!(matches!(parse_size("1gib"), Err(SizeError::UnknownUnit(_))));
        assert!(matches!(
            parse_size("20000000000GiB"),
            Err(SizeError::Overflow(_))
        ));
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(SizeError::Overflow(_))
        ));
    }

    #[test]
    fn formats_exact_units() {
        assert_eq!(format_size(1 << 30), "1 GiB");
        assert_eq!(format_size(3 << 20), "3 MiB");
        assert_eq!(format_size(20_000_000), "20000000 B");
        assert_eq!(format_size(0), "0 B");
    }

    proptest! {
        /// `n` with any unit parses to n * unit exactly, or reports overflow.
        #[test]
        fn number_with_unit_parses_to_product(n in any::<u64>(), i in 0usize..UNITS.len()) {
            let (unit, mult) = UNITS[i];
            let got = parse_size(&format!("{n}{unit}"));
            match n.checked_mul(mult) {
                Some(v) => prop_assert_eq!(got, Ok(v)),
                None => prop_assert!(matches!(got, Err(SizeError::Overflow(_)))),
            }
        }

        /// Formatting round-trips through parsing.
        #[test]
        fn format_round_trips(n in any::<u64>()) {
            let text = format_size(n).replace(' ', "");
            prop_assert_eq!(parse_size(&text), Ok(n));
        }

        /// No string makes the parser panic.
        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = parse_size(&s);
        }
    }
}
