//! The ranges file: the input of the LD_PRELOAD runtime for a program that cannot be relinked.
//!
//! Text, one `0xSTART 0xEND` line per range of stated addresses (hexadecimal, start below end),
//! `#` comments, and a `# build-id: HEX` line that the runtime checks against the running
//! program, ignoring the file on a mismatch. `runtime/src/ranges.c` reads it; this is the one
//! writer.

use std::io::{self, Write};

use crate::binary::StatedAddr;

/// Writes `ranges` (stated `[start, end)` pairs) for the program with `build_id` (hex), if known.
pub fn write_ranges(
    build_id: Option<&str>,
    ranges: &[(StatedAddr, StatedAddr)],
    out: &mut dyn Write,
) -> io::Result<()> {
    if let Some(id) = build_id {
        writeln!(out, "# build-id: {id}")?;
    }
    for (start, end) in ranges {
        writeln!(out, "{start:#x} {end:#x}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_first_then_one_range_a_line_in_hex() {
        let mut out = Vec::new();
        write_ranges(
            Some("ab12"),
            &[(StatedAddr(0x200000), StatedAddr(0x600000))],
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# build-id: ab12\n0x200000 0x600000\n"
        );
        let mut out = Vec::new();
        let at = |a, b| (StatedAddr(a), StatedAddr(b));
        write_ranges(None, &[at(1, 2), at(3, 4)], &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "0x1 0x2\n0x3 0x4\n");
    }
}
