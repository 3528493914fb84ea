//! Byte sizes on the command line: `200KB`, `1MB`, `100MB` (powers of 1000),
//! `64KiB`, `1GiB` (powers of 1024), or a plain number of bytes.

/// Parse a size; the error names what was wrong.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => return Err(format!("unknown size unit '{other}' in '{s}' (use B, KB, MB, GB, KiB, MiB, GiB)")),
    };
    let value: f64 = num.parse().map_err(|_| format!("'{s}' is not a size (examples: 1200, 200KB, 1MiB)"))?;
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("size '{s}' is out of range"));
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1200"), Ok(1200));
        assert_eq!(parse_size("200KB"), Ok(200_000));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("MB").is_err());
    }
}
