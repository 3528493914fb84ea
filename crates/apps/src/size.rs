//! Byte sizes as users write them: `1048576`, `200KB`, `1.5MB`, `64 KiB`.
//!
//! The one size grammar of the workspace: `artq sim --size`, `--recv-window`,
//! scenario files and the benchmarks all parse sizes here. DESIGN.md's rule:
//! `KB`/`MB`/`GB`/`TB` are powers of 1000, `KiB`/`MiB`/`GiB`/`TiB` powers of
//! 1024; units are case-insensitive (`kb`, `KiB`, `mib`), `K`/`M`/`G`/`T`
//! alone mean the decimal units, `B` or no unit means bytes, and a space may
//! separate number and unit. A decimal fraction is allowed when the result is
//! a whole number of bytes (`1.5KB` is 1500; `1.0001KB` is refused). The
//! arithmetic is exact integer arithmetic: no input overflows, rounds or
//! panics.

use serde::{Deserialize, Deserializer};

/// Why a size string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// No number where one was expected (`""`, `"MB"`, `"-1"`).
    #[error("'{0}' is not a size (examples: 1200, 200KB, 1.5MB, 1MiB)")]
    NoNumber(String),
    /// A unit other than the ones listed.
    #[error("unknown size unit in '{0}' (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)")]
    UnknownUnit(String),
    /// The fraction does not give a whole number of bytes.
    #[error("size '{0}' is not a whole number of bytes")]
    Fractional(String),
    /// The value does not fit in 64 bits.
    #[error("size '{0}' is too large")]
    Overflow(String),
}

/// Units, lowercase, and their multipliers.
const UNITS: [(&str, u64); 14] = [
    ("", 1),
    ("b", 1),
    ("k", 1_000),
    ("kb", 1_000),
    ("m", 1_000_000),
    ("mb", 1_000_000),
    ("g", 1_000_000_000),
    ("gb", 1_000_000_000),
    ("t", 1_000_000_000_000),
    ("tb", 1_000_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
];

/// Parses a size in bytes (see the module documentation for the grammar).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let int_len = t.bytes().take_while(u8::is_ascii_digit).count();
    let (int_part, rest) = t.split_at(int_len);
    let (frac_part, unit) = match rest.strip_prefix('.') {
        Some(r) => {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            r.split_at(n)
        }
        None => ("", rest),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(SizeError::NoNumber(text.to_string()));
    }
    let unit = unit.trim_start().to_ascii_lowercase();
    let mult = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|&(_, m)| m)
        .ok_or_else(|| SizeError::UnknownUnit(text.to_string()))?;
    let overflow = || SizeError::Overflow(text.to_string());
    let whole = if int_part.is_empty() {
        0
    } else {
        int_part.parse::<u64>().map_err(|_| overflow())?
    };
    let mut bytes = whole.checked_mul(mult).ok_or_else(overflow)?;
    // The fraction: digits d1 d2 ... dn stand for (d1..dn) / 10^n units.
    let frac_digits = frac_part.trim_end_matches('0');
    if !frac_digits.is_empty() {
        let denominator = u32::try_from(frac_digits.len())
            .ok()
            .and_then(|n| 10u128.checked_pow(n))
            .ok_or_else(|| SizeError::Fractional(text.to_string()))?;
        let numerator: u128 = frac_digits
            .parse()
            .map_err(|_| SizeError::Fractional(text.to_string()))?;
        let scaled = numerator
            .checked_mul(u128::from(mult))
            .ok_or_else(|| SizeError::Fractional(text.to_string()))?;
        if scaled % denominator != 0 {
            return Err(SizeError::Fractional(text.to_string()));
        }
        let extra = u64::try_from(scaled / denominator).map_err(|_| overflow())?;
        bytes = bytes.checked_add(extra).ok_or_else(overflow)?;
    }
    Ok(bytes)
}

/// Formats a byte count for humans in the largest binary unit that divides
/// it exactly (`1 GiB`, `20000000 B`): the output always parses back to
/// `bytes`.
pub fn format_size(bytes: u64) -> String {
    for (name, mult) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= mult && bytes % mult == 0 {
            return format!("{} {name}", bytes / mult);
        }
    }
    format!("{bytes} B")
}

/// A size in a TOML or JSON file: an integer number of bytes or a string
/// with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeRepr {
    Bytes(u64),
    Text(String),
}

/// Serde helper: accepts `1000000` or `"1MB"`.
pub fn deserialize_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match SizeRepr::deserialize(d)? {
        SizeRepr::Bytes(n) => Ok(n),
        SizeRepr::Text(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Serde helper: an optional size (`None` when the key is absent; use with
/// `#[serde(default)]`).
pub fn deserialize_opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    deserialize_size(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_design_md_spellings() {
        assert_eq!(parse_size("1048576"), Ok(1_048_576));
        assert_eq!(parse_size("200KB"), Ok(200_000));
        assert_eq!(parse_size(" 1MB "), Ok(1_000_000));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1gib"), Ok(1 << 30));
        assert_eq!(parse_size("64 KiB"), Ok(65_536));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size(".5KB"), Ok(500));
        assert_eq!(parse_size("2.000"), Ok(2));
        assert_eq!(parse_size("3k"), Ok(3000));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
    }

    #[test]
    fn rejects_bad_sizes() {
        for bad in ["", "MB", "-1", ".", " KB"] {
            assert!(
                matches!(parse_size(bad), Err(SizeError::NoNumber(_))),
                "{bad}"
            );
        }
        for bad in ["12XB", "1 parsec", "1e30GB", "1.5.5MB"] {
            assert!(
                matches!(parse_size(bad), Err(SizeError::UnknownUnit(_))),
                "{bad}"
            );
        }
        assert!(matches!(parse_size("1.5"), Err(SizeError::Fractional(_))));
        assert!(matches!(
            parse_size("1.0001KB"),
            Err(SizeError::Fractional(_))
        ));
        assert!(matches!(
            parse_size("20000000000GiB"),
            Err(SizeError::Overflow(_))
        ));
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(SizeError::Overflow(_))
        ));
        let long_fraction = format!("1.{}1KB", "0".repeat(60));
        assert!(parse_size(&long_fraction).is_err());
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
            prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
        }

        /// No string makes the parser panic.
        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = parse_size(&s);
        }
    }
}
