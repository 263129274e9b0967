//! `--format lld-order`: lld's `--symbol-ordering-file`, one symbol a line (every symbol of
//! each function), between the markers object's two symbols.

use std::io::{self, Write};

use super::format::{Format, Laid, Writer};
use super::write_order_file;
use crate::binary::{HOT_END, HOT_START};

/// `--format lld-order`.
pub(crate) static FORMAT: Format = Format {
    name: "lld-order",
    help: "lld --symbol-ordering-file (with --markers)",
    writer: Writer::order_file(write),
};

fn write(laid: &Laid, out: &mut dyn Write) -> io::Result<()> {
    let symbols = laid.entries().iter().flat_map(|e| e.symbols());
    write_order_file(HOT_START, symbols.map(str::to_string), HOT_END, out)
}
