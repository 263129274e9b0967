//! `order --algorithm`: its choices are `auto` and the library's table of algorithms, so that
//! an algorithm added there is offered here with its help line.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use hottext::layout::{self, auto, ALGORITHMS};
use hottext::link::Ordering;

/// The parser of `--algorithm`: `auto`, then every algorithm of the table.
pub(super) fn parser() -> impl TypedValueParser<Value = Ordering> {
    let tried: Vec<&str> = auto::candidates().map(|a| a.name).collect();
    let auto_help = format!(
        "Order with each of {}, keep the layout the profile's model scores best (the share of call \
         weight that leaves its 4 KiB page, then the modelled L1i misses)",
        tried.join(", ")
    );
    let choices = std::iter::once(PossibleValue::new("auto").help(auto_help)).chain(
        ALGORITHMS
            .iter()
            .map(|a| PossibleValue::new(a.name).help(a.help)),
    );
    PossibleValuesParser::new(choices)
        .map(|name| layout::algorithm(&name).map_or(Ordering::Auto, Ordering::With))
}
