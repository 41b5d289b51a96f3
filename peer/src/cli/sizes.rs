//! Sizes as people write them (`500M`, `10G`) and read them (`1.5 GiB`).

/// A size as people write it: `1048576`, `500M`, `10G`, `1.5GiB`, `2TB`
/// (K, M, G, T: powers of 1024).
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("'{text}' is not a size (for example 500M, 10G)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => anyhow::bail!("'{text}' is not a size (for example 500M, 10G)"),
    };
    let bytes = number * (1u64 << shift) as f64;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        anyhow::bail!("'{text}' is not a size this can use");
    }
    Ok(bytes as u64)
}

/// `b` bytes for a person: `512 B`, `1.5 KiB`, `3.2 GiB` (powers of 1024).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
