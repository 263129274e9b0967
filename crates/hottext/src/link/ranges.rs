//! The ranges file: the input of the LD_PRELOAD runtime for a program that cannot be relinked.
//!
//! Text, one `0xSTART 0xEND` line per range of stated addresses (hexadecimal, start below end),
//! `#` comments, and a `# build-id: HEX` line that the runtime checks against the running
//! program, ignoring the file on a mismatch. `runtime/src/ranges.c` reads it for the preload
//! library; [`write_ranges`] is the one writer, [`read_ranges`] the reader of `verify --pid
//! --ranges`, which checks the pages the runtime mapped from it.

use std::io::{self, Write};

use super::format::{Format, Placed, PlacedOutput, Writer};
use super::EmitError;
use crate::binary::StatedAddr;
use crate::layout::metrics::hot_ranges;

/// `--format ranges`.
pub(crate) static FORMAT: Format = Format {
    name: "ranges",
    help: "Hottest 2 MiB ranges of the unmodified binary, for the LD_PRELOAD runtime (order only)",
    writer: Writer::Placed(write_placed),
};

/// The hottest 2 MiB pages of the binary as it is placed that its executable segments hold
/// whole, at most `max_pages`, for its build (the preload library refuses a ranges file made
/// for another build).
fn write_placed(placed: &Placed, out: &mut dyn Write) -> Result<PlacedOutput, EmitError> {
    let Some((binary, at)) = placed.binary else {
        return Err(EmitError::NeedsBinary {
            format: FORMAT.name,
        });
    };
    let hot = hot_ranges(placed.graph, at, &binary.exec_segments, placed.max_pages);
    write_ranges(binary.build_id_hex().as_deref(), &hot.ranges, out)?;
    Ok(PlacedOutput {
        ranges: Some(hot.ranges),
        partial_pages: hot.partial_pages,
    })
}

/// Writes `ranges` (stated `[start, end)` pairs) for the program with `build_id` (hex), if known.
fn write_ranges(
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

/// A ranges file as read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RangesFile {
    /// The build the ranges are for (hex), if the file says.
    pub build_id: Option<String>,
    /// The ranges, stated `[start, end)` pairs, in the file's order.
    pub ranges: Vec<(StatedAddr, StatedAddr)>,
}

/// A line of a ranges file that is not what `write_ranges` writes.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {what} (want `0xSTART 0xEND`, start below end, or a `#` comment)")]
pub struct RangesError {
    /// The line, counted from 1.
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

/// Reads a ranges file: what the runtime reads, refusing what it would ignore with a warning.
pub fn read_ranges(text: &str) -> Result<RangesFile, RangesError> {
    let mut file = RangesFile::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let bad = |what: String| RangesError { line: i + 1, what };
        if let Some(id) = line.strip_prefix("# build-id:") {
            file.build_id = Some(id.trim().to_ascii_lowercase());
            continue;
        }
        let fields = line.split('#').next().unwrap_or("").trim();
        if fields.is_empty() {
            continue;
        }
        let address = |field: Option<&str>| {
            let field = field.ok_or_else(|| bad(format!("{fields:?} has one address")))?;
            let digits = field.strip_prefix("0x").unwrap_or(field);
            u64::from_str_radix(digits, 16)
                .map(StatedAddr)
                .map_err(|_| bad(format!("{field:?} is not a hexadecimal address")))
        };
        let mut words = fields.split_whitespace();
        let (start, end) = (address(words.next())?, address(words.next())?);
        if let Some(extra) = words.next() {
            return Err(bad(format!("{extra:?} follows the range")));
        }
        if end <= start {
            return Err(bad(format!("{start:#x} {end:#x} is empty")));
        }
        file.ranges.push((start, end));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_is_read_back_and_bad_lines_are_named() {
        let ranges = [(StatedAddr(0x200000), StatedAddr(0x600000))];
        let mut out = Vec::new();
        write_ranges(Some("AB12"), &ranges, &mut out).unwrap();
        let read = read_ranges(&String::from_utf8(out).unwrap()).unwrap();
        assert_eq!(read.build_id.as_deref(), Some("ab12"));
        assert_eq!(read.ranges, ranges);
        assert_eq!(
            read_ranges("# note\n\n0x1 2 # c\n").unwrap().ranges.len(),
            1
        );
        for (text, line) in [
            ("0x1\n", 1),
            ("#\n0x2 0x1\n", 2),
            ("0x1 0xz\n", 1),
            ("1 2 3\n", 1),
        ] {
            assert_eq!(read_ranges(text).unwrap_err().line, line, "{text:?}");
        }
    }

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
