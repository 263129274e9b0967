//! Where the hot functions start in the hot range, besides their order: the rule the ld script
//! writes (`link::ld_script`) and the layout model places by (`metrics::place_as_linked`), so
//! that the model sees the addresses the link gives. A layout concept the linker input carries
//! out, hence here, below `link`.

use serde::Serialize;

/// The alignment GCC and Clang give a function at -O2 on x86-64, which a linker keeps.
pub const COMPILED_ALIGNMENT: u64 = 16;

/// Where hot functions start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Alignment {
    /// Where the compiler's own section alignment puts them.
    #[default]
    AsCompiled,
    /// On a `line`-byte boundary when that makes the function span fewer lines and costs at most
    /// `max_padding` bytes (BOLT pads functions by at most 32 bytes for the same reason: padding
    /// is hot-range bytes that hold no code). `compiled` is the alignment the compiler gave the
    /// function's section (16 for GCC and Clang at -O2 on x86-64): a script cannot read it,
    /// and the rule must know where the section would start without it.
    CacheLines {
        /// The cache line's size in bytes.
        line: u64,
        /// The most padding a function may get.
        max_padding: u64,
        /// The compiler's alignment of function sections.
        compiled: u64,
    },
}

impl Alignment {
    /// The rule [`Alignment::CacheLines`] with BOLT's bound, as `--align-cache-lines` writes it:
    /// 64 B lines, at most 32 B of padding, functions compiled at 16 B.
    pub const CACHE_LINES: Alignment = Alignment::CacheLines {
        line: 64,
        max_padding: 32,
        compiled: 16,
    };

    /// Where the linker starts a function of `size` bytes that follows code ending at `next`,
    /// by this rule: what the script's line before each function makes the linker do, so that
    /// a model of the layout ([`super::metrics::place_as_linked`]) places functions
    /// where the link will.
    pub fn start(&self, next: u64, size: u64) -> u64 {
        let round_up = |at: u64, to: u64| at.checked_next_multiple_of(to.max(1)).unwrap_or(at);
        match *self {
            Alignment::AsCompiled => round_up(next, COMPILED_ALIGNMENT),
            Alignment::CacheLines {
                line,
                max_padding,
                compiled,
            } => {
                let at = round_up(next, compiled);
                let (into_line, padding) = (at % line, at.wrapping_neg() % line);
                let spans_extra = into_line.saturating_add(size) > size.div_ceil(line) * line;
                if size > 0 && spans_extra && padding <= max_padding {
                    round_up(at, line)
                } else {
                    at
                }
            }
        }
    }
}

/// How the script places the hot functions besides their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ScriptPlacement {
    /// Where each hot function starts.
    pub alignment: Alignment,
    /// Bytes of padding after `__hot_start`, a multiple of 16: as `--hot-offset` gives it (a
    /// multiple of 64 to measure a layout at several offsets), or the 0-48 `auto`'s cache-set
    /// model picks where shifting the functions within their lines pays
    /// ([`super::placement`]).
    pub hot_offset: u64,
    /// End the range on a 2 MiB boundary, padding after the last function. [`crate::link::write`]
    /// sets it from its [`crate::link::Padding`] plan; order files get it from
    /// [`crate::link::markers_object`].
    pub pad_to_huge_page: bool,
}
