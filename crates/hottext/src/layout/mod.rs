//! Ordering the hot functions, and scoring an order.
//!
//! Each algorithm lives in its own file and sees only a resolved [`Graph`]; parsing and symbol
//! look-ups happen elsewhere.

mod c3;
pub mod metrics;
mod pettis_hansen;

use crate::graph::{FuncId, Graph};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Call-chain clustering (hfsort, section 5.2): the default.
    C3,
    /// Pettis-Hansen (section 5.1), for comparison.
    PettisHansen,
}

/// The thresholds of the algorithms, each with the paper's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// C3 stops growing a cluster once it is larger than this many bytes. The paper uses the
    /// page size (4 KiB): a larger cluster no longer fits a page, so merging gains nothing.
    pub merge_threshold: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            merge_threshold: 4096,
        }
    }
}

/// Every function of the graph, in layout order.
pub fn order(graph: &Graph, algorithm: Algorithm, params: &Params) -> Vec<FuncId> {
    match algorithm {
        Algorithm::C3 => c3::order(graph, params),
        Algorithm::PettisHansen => pettis_hansen::order(graph),
    }
}

#[cfg(test)]
mod tests;
