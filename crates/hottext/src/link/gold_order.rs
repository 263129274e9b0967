//! `--format gold-order`: gold's `--section-ordering-file`, one input section a line, every
//! section that can hold each function's symbols, between the markers object's two sections,
//! then the parts clang's basic-block sections split off them (`.text.split.NAME`): gold puts
//! unlisted sections first, and these belong right after the range.

use std::io::{self, Write};

use super::format::{Format, Laid, Writer};
use super::{unique, write_order_file, END_SECTION, START_SECTION};

/// `--format gold-order`.
pub(crate) static FORMAT: Format = Format {
    name: "gold-order",
    help: "gold --section-ordering-file (with --markers)",
    writer: Writer::order_file(write),
};

fn write(laid: &Laid, out: &mut dyn Write) -> io::Result<()> {
    let sections = laid.entries().iter().flat_map(|e| e.sections());
    write_order_file(START_SECTION, sections, END_SECTION, out)?;
    for section in unique(laid.entries().iter().flat_map(|e| e.split_sections())) {
        writeln!(out, "{section}")?;
    }
    Ok(())
}
