//! The hot range on 2 MiB pages: what the runtime's huge pages add to the iTLB figures.
//!
//! The runtime maps the hot range's whole 2 MiB pages (those `verify --binary` counts:
//! [`mappable_hot_pages`]) onto huge pages; the CPU then translates that code with its entries
//! for 2 MiB pages and the rest with its entries for 4 KiB pages. Cachegrind simulates one page
//! size a run, so one more run puts every fetch on 2 MiB pages (both iTLB levels at once: see
//! `Slot`), and the figures are combined from the counts cachegrind writes per function: a
//! function on an executable's hot pages counts its misses from the 2 MiB run, every other
//! function its misses from the 4 KiB run of the same level. That run is made only when a
//! process of the workload ran an executable with a hot page that is linked with the runtime
//! (`hottext_hugify_self` in it: without the runtime the text stays on 4 KiB pages); otherwise
//! the figures are the 4 KiB ones, exactly. A runtime preloaded with `LD_PRELOAD` is not seen.
//!
//! What the combination leaves out:
//! - In the 4 KiB run the hot code takes 4 KiB entries too, evicting other code's pages; in the
//!   2 MiB run the other code takes 2 MiB entries beside the hot pages. A CPU with separate
//!   entries per page size (Intel's L1 iTLB) has neither, so there the figure is close, the
//!   other code's misses if anything high. One whose entries hold either size (AMD's) has the
//!   hot pages take a few entries the other code then lacks, which the figure does not count.
//! - The 2 MiB L2 level is looked up on L1 misses only, as the hardware does, the 4 KiB L2 model
//!   on every fetch; on 2 MiB pages L2 misses are a page's first touch either way.
//! - Valgrind loads a position-independent executable 0x108000 bytes past a 2 MiB boundary, so
//!   a hot page spans two simulated 2 MiB pages: up to twice the entries and first touches.
//! - Functions are told apart by the names cachegrind gives them: a name the executable also
//!   gives to a function outside the hot pages (a static namesake) counts as outside, and a
//!   shared library's function named like a hot one counts as hot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use foldhash::{HashMap, HashSet};

use crate::binary::{symbol_of, Binary, Function, StatedAddr, HUGE_PAGE};
use crate::verify::mappable_hot_pages;

/// The functions on one executable's hot 2 MiB pages.
#[derive(Debug, Default)]
pub(super) struct HotFunctions {
    /// Their names as the symbol table has them, which is how cachegrind names them (run with
    /// `--demangle=no`).
    pub names: HashSet<String>,
    /// The whole 2 MiB pages the runtime maps.
    pub pages: u64,
}

impl HotFunctions {
    /// None when the executable has no whole 2 MiB page of hot range, or no runtime to map it.
    fn of(binary: &Binary) -> Option<HotFunctions> {
        if !binary.links_runtime {
            return None;
        }
        let pages = mappable_hot_pages(binary)?;
        Some(HotFunctions {
            names: names_on_pages(&binary.functions, pages),
            pages: (pages.1 .0 - pages.0 .0) / HUGE_PAGE,
        })
    }
}

/// The names of the functions that start on `[start, end)`, less those a function elsewhere
/// has too (a static namesake, which cachegrind cannot tell apart from it).
fn names_on_pages(
    functions: &[Function],
    (start, end): (StatedAddr, StatedAddr),
) -> HashSet<String> {
    let (mut inside, mut outside) = (HashSet::default(), HashSet::default());
    for function in functions {
        let names = match (start..end).contains(&function.start) {
            true => &mut inside,
            false => &mut outside,
        };
        for name in std::iter::once(&function.name).chain(&function.aliases) {
            names.insert(symbol_of(name).to_string());
        }
    }
    inside.difference(&outside).cloned().collect()
}

/// Executables' hot functions, each executable read once.
#[derive(Debug, Default)]
pub(super) struct HotCode {
    by_path: HashMap<PathBuf, Option<HotFunctions>>,
}

impl HotCode {
    /// An executable that cannot be read as ELF (a script's interpreter is read instead; one
    /// gone since) has none: its code stays on 4 KiB pages, as the runtime would leave it.
    pub fn of(&mut self, executable: &Path) -> Option<&HotFunctions> {
        self.by_path
            .entry(executable.to_path_buf())
            .or_insert_with(|| {
                Binary::open(executable)
                    .ok()
                    .as_ref()
                    .and_then(HotFunctions::of)
            })
            .as_ref()
    }
}

/// The executables with hot pages a run's processes ran, and their pages.
pub type HotRanges = BTreeMap<String, u64>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_also_outside_the_hot_pages_is_not_hot() {
        let function = |name: &str, start: u64| Function {
            start: StatedAddr(start),
            size: 16,
            name: name.to_string(),
            aliases: Vec::new(),
        };
        let functions = [
            function("hot", HUGE_PAGE + 64),
            function("helper;a.c", HUGE_PAGE + 128),
            function("helper;b.c", 3 * HUGE_PAGE),
            function("cold", 3 * HUGE_PAGE + 64),
        ];
        let names = names_on_pages(
            &functions,
            (StatedAddr(HUGE_PAGE), StatedAddr(2 * HUGE_PAGE)),
        );
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["hot"]);
    }
}
