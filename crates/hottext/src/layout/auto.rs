//! `--algorithm auto`: order with every algorithm, score each layout with the profile's own
//! model of the instruction TLB and cache ([`metrics`](super::metrics)), keep the best.
//!
//! The score, lowest best, is the call weight that leaves its 4 KiB page (`1 - calls_within_4k`,
//! from the real call sites): on PostgreSQL that figure ranked hottext's layouts in the same
//! order as cachegrind's L1-iTLB misses, which is where layouts differ most (up to 1.3× between
//! orders against 1.02× for L1i misses; bench/RESULTS.md). Layouts within
//! `TIE` (1 %) of the best are told apart by the i-cache model (`icache_overflow`), then by the
//! order of [`ALGORITHMS`].

use serde::Serialize;

use super::alignment::COMPILED_ALIGNMENT;
use super::metrics::{measure, place_in_order, Metrics};
use super::{order, Algorithm, Params, ALGORITHMS};
use crate::graph::{FuncId, Graph};
use crate::parallel::join;

/// The algorithms `auto` tries, in order of preference on a tie.
pub fn candidates() -> impl Iterator<Item = &'static Algorithm> {
    ALGORITHMS.iter().filter(|a| a.tried_by_auto)
}

/// Scores closer than this (relative) count as equal.
pub(super) const TIE: f64 = 0.01;

/// One algorithm's layout, modelled.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The algorithm's name.
    pub algorithm: &'static str,
    /// `1 - calls_within_4k`: lower is better.
    pub score: f64,
    /// The layout's figures, its functions placed back to back.
    pub metrics: Metrics,
    /// Whether `auto` kept this layout.
    pub chosen: bool,
}

/// The chosen order and every candidate's figures.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The algorithm whose layout was kept.
    pub algorithm: &'static Algorithm,
    /// Its order of the graph's functions.
    pub order: Vec<FuncId>,
    /// Every candidate's figures, in the order of [`candidates`], the kept one marked.
    pub candidates: Vec<Candidate>,
}

/// Orders `graph` with each of the [`candidates`], placed back to back as the linker would, and
/// keeps the best by the score. `progress` hears each algorithm's name before it runs.
///
/// The first candidate, cdsort, runs on a thread of its own while the others run one after
/// another on this one: on a 1 M-function graph cdsort takes about as long as c3 and ph
/// together, so two at a time halves the wait, and memory holds two algorithms' state at most.
pub fn choose(graph: &Graph, params: &Params, progress: &(dyn Fn(&str) + Sync)) -> Choice {
    let run = |algorithm: &'static Algorithm| {
        progress(algorithm.name);
        let ordered = order(graph, algorithm, params);
        let metrics = measure(graph, &place_in_order(graph, &ordered, COMPILED_ALIGNMENT));
        let candidate = Candidate {
            algorithm: algorithm.name,
            score: 1.0 - metrics.calls_within_4k,
            metrics,
            chosen: false,
        };
        (candidate, ordered)
    };
    let tried: Vec<&'static Algorithm> = candidates().collect();
    let (first, rest) = join(
        || run(tried[0]),
        || tried[1..].iter().map(|&a| run(a)).collect::<Vec<_>>(),
    );
    let (mut candidates, mut orders): (Vec<Candidate>, Vec<Vec<FuncId>>) =
        std::iter::once(first).chain(rest).unzip();
    let index = best(&candidates);
    candidates[index].chosen = true;
    Choice {
        algorithm: tried[index],
        order: orders.swap_remove(index),
        candidates,
    }
}

/// The lowest score; among the candidates within [`TIE`] of it, the smallest i-cache overflow
/// (by more than [`TIE`]), then the earliest.
fn best(candidates: &[Candidate]) -> usize {
    let lowest = candidates
        .iter()
        .map(|c| c.score)
        .fold(f64::INFINITY, f64::min);
    let tied: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].score <= lowest + TIE * lowest.abs().max(f64::MIN_POSITIVE))
        .collect();
    let mut pick = tied[0];
    for &i in &tied[1..] {
        let (new, old) = (&candidates[i].metrics, &candidates[pick].metrics);
        if new.icache_overflow < old.icache_overflow * (1.0 - TIE) {
            pick = i;
        }
    }
    pick
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ids;

    /// A chain of big functions: every order keeps main's callees apart differently.
    fn graph() -> Graph {
        let sizes = [3000, 3000, 200, 200, 5000, 100];
        let names: Vec<String> = (0..sizes.len()).map(|i| format!("f{i}")).collect();
        let funcs: Vec<(&str, u64, u64)> = (0..sizes.len())
            .map(|i| (names[i].as_str(), sizes[i], 10 + i as u64))
            .collect();
        let calls: Vec<(&str, &str, u64)> =
            [(0, 2, 50), (0, 3, 40), (2, 5, 30), (1, 4, 5), (4, 1, 5)]
                .iter()
                .map(|&(a, b, w)| (names[a].as_str(), names[b].as_str(), w))
                .collect();
        crate::layout::tests::graph(&funcs, &calls)
    }

    #[test]
    fn every_candidate_is_scored_and_the_lowest_score_is_chosen() {
        let heard = std::sync::Mutex::new(Vec::new());
        let choice = choose(&graph(), &Params::default(), &|a| {
            heard.lock().unwrap().push(a.to_string())
        });
        let mut heard = heard.into_inner().unwrap();
        heard.sort();
        assert_eq!(heard, ["c3", "cdsort", "ph"]);
        assert_eq!(choice.candidates.len(), 3);
        assert_eq!(choice.candidates.iter().filter(|c| c.chosen).count(), 1);
        let chosen = choice.candidates.iter().find(|c| c.chosen).unwrap();
        assert_eq!(chosen.algorithm, choice.algorithm.name);
        let lowest = choice
            .candidates
            .iter()
            .map(|c| c.score)
            .fold(f64::INFINITY, f64::min);
        assert!(
            chosen.score <= lowest * (1.0 + TIE),
            "{:?}",
            choice.candidates
        );
        assert_eq!(
            choice.order,
            order(&graph(), choice.algorithm, &Params::default())
        );
    }

    #[test]
    fn the_table_names_each_algorithm_once_and_auto_tries_some() {
        let names: Vec<&str> = ALGORITHMS.iter().map(|a| a.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert!(
            !names.contains(&"auto"),
            "auto is the CLI's, not an algorithm"
        );
        assert!(candidates().next().is_some());
        for name in names {
            assert_eq!(crate::layout::algorithm(name).unwrap().name, name);
        }
    }

    #[test]
    fn a_tie_goes_to_the_smaller_icache_overflow_then_to_the_earlier_candidate() {
        let metrics = |overflow| {
            let mut m = measure(
                &graph(),
                &place_in_order(&graph(), &ids([0, 1, 2, 3, 4, 5]), 1),
            );
            m.icache_overflow = overflow;
            m
        };
        let candidate = |score, overflow| Candidate {
            algorithm: "x",
            score,
            metrics: metrics(overflow),
            chosen: false,
        };
        // Clearly lower wins whatever its overflow.
        assert_eq!(best(&[candidate(0.40, 0.1), candidate(0.30, 0.5)]), 1);
        // Within 1 % of the lowest: the smaller overflow, else the earlier candidate.
        assert_eq!(best(&[candidate(0.401, 0.5), candidate(0.40, 0.1)]), 1);
        assert_eq!(best(&[candidate(0.401, 0.1), candidate(0.40, 0.5)]), 0);
        assert_eq!(best(&[candidate(0.40, 0.3), candidate(0.40, 0.3)]), 0);
        // The tie is with the lowest score, not with whichever was best so far.
        let three = [
            candidate(0.400, 0.05),
            candidate(0.396, 0.9),
            candidate(0.3925, 0.9),
        ];
        assert_eq!(best(&three), 1);
    }
}
