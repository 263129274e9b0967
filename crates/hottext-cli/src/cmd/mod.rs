//! One module per verb; each has `Args` (clap) and `run`.

pub mod ab;
pub mod fetch;
pub mod order;
pub mod pipeline;
pub mod profile;
pub mod record;
mod simulate;
pub mod stat;
pub mod store;
pub mod verify;

use hottext::link::Format;

/// `--format` of the verbs that write an order (`order`, `fetch`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// One symbol a line
    List,
    /// GNU ld / lld linker script (-Wl,-T,FILE)
    LdScript,
    /// gold --section-ordering-file (with --markers)
    GoldOrder,
    /// lld --symbol-ordering-file (with --markers)
    LldOrder,
    /// Hottest 2 MiB ranges of the unmodified binary, for the LD_PRELOAD runtime (order only)
    Ranges,
    /// The call edges for lld's own ordering, -Wl,--call-graph-ordering-file=FILE with
    /// --call-graph-profile-sort=cdsort or hfsort: no markers, for comparing lld's orders
    /// (order only)
    LldCgprofile,
}

impl FormatArg {
    /// The order file this format names; `None` for `ranges` and `lld-cgprofile`, which are no
    /// order (the verb writes them itself).
    pub fn link_format(self) -> Option<Format> {
        match self {
            FormatArg::List => Some(Format::List),
            FormatArg::LdScript => Some(Format::LdScript),
            FormatArg::GoldOrder => Some(Format::GoldOrder),
            FormatArg::LldOrder => Some(Format::SymbolOrder),
            FormatArg::Ranges | FormatArg::LldCgprofile => None,
        }
    }
}

/// `--pid`: a process id, which is positive.
pub fn pid_arg() -> clap::builder::RangedI64ValueParser<hottext::os::proc::Pid> {
    clap::value_parser!(hottext::os::proc::Pid).range(1..)
}
