//! `--format list`: one profile name a line, in order, for people and for scripts of their
//! own. No linker reads it.

use std::io::{self, Write};

use super::format::{Format, Laid, Names, OrderWriter, Writer};

/// `--format list`.
pub(crate) static FORMAT: Format = Format {
    name: "list",
    help: "One symbol a line",
    writer: Writer::Order(OrderWriter {
        names: Names::Any,
        needs_markers_object: false,
        places_individually: false,
        write,
        splits: None,
    }),
};

fn write(laid: &Laid, out: &mut dyn Write) -> io::Result<()> {
    for e in laid.entries() {
        writeln!(out, "{}", e.name)?;
    }
    Ok(())
}
