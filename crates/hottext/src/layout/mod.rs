//! Ordering the hot functions, and scoring an order.
//!
//! Each algorithm lives in its own file and sees only a resolved [`Graph`]; parsing and symbol
//! look-ups happen elsewhere.

pub mod alignment;
pub mod auto;
pub mod block_order;
mod c3;
pub mod cache_sets;
mod cdsort;
mod edge_lists;
mod heat;
pub mod metrics;
mod pair_index;
mod pettis_hansen;
pub mod placement;
mod queue;

use serde::Serialize;

pub use c3::C3Params;
pub use cdsort::CdsortParams;

use crate::graph::{FuncId, Graph};

/// One ordering algorithm, as `order --algorithm`, `auto` and the fuzz target see it. Each
/// algorithm's file defines its own (`ALGORITHM`); [`ALGORITHMS`] lists them.
#[derive(Debug)]
pub struct Algorithm {
    /// The name `order --algorithm` takes and reports print.
    pub name: &'static str,
    /// One line for `order --help`.
    pub help: &'static str,
    /// Whether `--algorithm auto` orders with it and scores the layout.
    pub tried_by_auto: bool,
    order: fn(&Graph, &Params) -> Vec<FuncId>,
}

/// Every algorithm, in `auto`'s order of preference on a tie. A new algorithm is a file of
/// its own here with its `ALGORITHM`, its `mod` line above and one line in this table.
pub static ALGORITHMS: &[Algorithm] = &[cdsort::ALGORITHM, c3::ALGORITHM, pettis_hansen::ALGORITHM];

/// The algorithm called `name` (as `order --algorithm` spells it).
pub fn algorithm(name: &str) -> Option<&'static Algorithm> {
    ALGORITHMS.iter().find(|a| a.name == name)
}

/// The thresholds of the algorithms, each with its source's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Params {
    /// C3's thresholds.
    pub c3: C3Params,
    /// cdsort's thresholds.
    pub cdsort: CdsortParams,
}

/// Every function of the graph, in layout order.
pub fn order(graph: &Graph, algorithm: &Algorithm, params: &Params) -> Vec<FuncId> {
    (algorithm.order)(graph, params)
}

#[cfg(test)]
mod cdsort_tests;
#[cfg(test)]
mod tests;
