//! Ordering the hot functions, and scoring an order.
//!
//! Each algorithm lives in its own file and sees only a resolved [`Graph`]; parsing and symbol
//! look-ups happen elsewhere.

pub mod auto;
mod c3;
mod cdsort;
mod edge_lists;
pub mod metrics;
mod pair_index;
mod pettis_hansen;
mod queue;

use serde::Serialize;

pub use c3::C3Params;
pub use cdsort::CdsortParams;

use crate::graph::{FuncId, Graph};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Call-chain clustering (hfsort, section 5.2).
    C3,
    /// Pettis-Hansen (section 5.1), for comparison.
    PettisHansen,
    /// Cache-directed sort (LLVM's CDSort): merges scored by call distance, with the real call
    /// sites where the profile has them, and by i-TLB density.
    Cdsort,
}

impl Algorithm {
    /// The name `order --algorithm` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::C3 => "c3",
            Algorithm::PettisHansen => "ph",
            Algorithm::Cdsort => "cdsort",
        }
    }
}

/// The thresholds of the algorithms, each with its source's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Params {
    pub c3: C3Params,
    pub cdsort: CdsortParams,
}

/// Every function of the graph, in layout order.
pub fn order(graph: &Graph, algorithm: Algorithm, params: &Params) -> Vec<FuncId> {
    match algorithm {
        Algorithm::C3 => c3::order(graph, &params.c3),
        Algorithm::PettisHansen => pettis_hansen::order(graph),
        Algorithm::Cdsort => cdsort::order(graph, &params.cdsort),
    }
}

#[cfg(test)]
mod cdsort_tests;
#[cfg(test)]
mod tests;
