//! Shared output helpers: JSON to stdout, warnings to stderr, human sizes.

use std::io::Write;

use serde::Serialize;

pub fn json(value: &impl Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

pub fn warn(msg: impl std::fmt::Display) {
    eprintln!("hottext: warning: {msg}");
}

/// Bytes as a short human figure (KiB, MiB).
pub fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// Names a few items of a long list: "a, b, c and 97 more".
pub fn some_of(items: &[&str], most: usize) -> String {
    let shown = items
        .iter()
        .take(most)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    match items.len().saturating_sub(most) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}
