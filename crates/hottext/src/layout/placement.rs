//! `auto`'s choice of how an order is placed in an ld script: whether functions start on cache
//! lines ([`Alignment::CACHE_LINES`]) and how many bytes pad the range's start, kept only where
//! the cache-set model ([`super::cache_sets`]) says they pay.
//!
//! Blanket alignment can hurt: it moves every function it aligns to a line start, and small
//! hot functions then pile into the same sets (redis: 3.3× the simulated L1i misses, issue 36).
//! A padding of 16-48 B moves every function within its lines instead, which changes which
//! ones straddle a line. Whole lines of padding change nothing in the model (they rename the
//! sets), so only those four are tried; `--hot-offset` measures the rest as luck.

use serde::Serialize;

use super::alignment::{Alignment, ScriptPlacement};
use super::auto::TIE;
use super::cache_sets::set_conflicts;
use super::metrics::{measure, place_as_linked, Calls, Metrics};
use crate::caches::L1I;
use crate::graph::{FuncId, Graph};
use crate::parallel::join;

/// The paddings of the range's start tried, in bytes: the compiled alignment's steps within a
/// 64 B line.
pub const PADDINGS: [u64; 4] = [0, 16, 32, 48];

/// Relative differences of the modelled figure below this are float rounding (sums of the same
/// terms in another order).
const ROUNDING: f64 = 1e-9;

/// One placement of the order, modelled.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementCandidate {
    /// The rule the script applies before each function.
    pub alignment: Alignment,
    /// Bytes after `__hot_start` (and any `--hot-offset`) before the first function.
    pub start_padding: u64,
    /// The modelled L1i figure: expected misses per sample ([`super::cache_sets`]).
    pub icache_overflow: f64,
    /// `1 - calls_within_4k`, as for the algorithms: padding moves calls across pages.
    pub score: f64,
    /// Whether this is the placement kept.
    pub chosen: bool,
}

/// The placement kept and every candidate's figures.
#[derive(Debug, Clone)]
pub struct PlacementChoice {
    /// What the ld script is to do: the kept alignment, and `hot_offset` with its padding.
    pub placement: ScriptPlacement,
    /// The chosen placement's layout figures.
    pub metrics: Metrics,
    /// Every placement tried: each of [`PADDINGS`] with the base's alignment, then with cache lines.
    pub candidates: Vec<PlacementCandidate>,
}

/// Scores `order` under every alignment and padding ([`PADDINGS`]) on top of `base` (whose
/// alignment is the first candidate's and whose `hot_offset` every candidate keeps), and keeps
/// `base` unless another candidate models more than `TIE` (1 %) fewer L1i misses without more
/// than `TIE` (1 %) more calls leaving their page: the default output stays as it was where no
/// alignment pays. Among those that pay, the fewest misses (beyond float rounding), then the
/// earliest.
pub fn choose_placement(graph: &Graph, order: &[FuncId], base: ScriptPlacement) -> PlacementChoice {
    let mut alignments = vec![base.alignment];
    if base.alignment != Alignment::CACHE_LINES {
        alignments.push(Alignment::CACHE_LINES);
    }
    let tried: Vec<(Alignment, u64)> = alignments
        .iter()
        .flat_map(|&a| PADDINGS.map(|p| (a, p)))
        .collect();
    let run = |&(alignment, padding): &(Alignment, u64)| {
        let placement = ScriptPlacement {
            alignment,
            hot_offset: base.hot_offset + padding,
            ..base
        };
        let at = place_as_linked(graph, order, &placement);
        let calls = Calls::of(graph, &at);
        // The two figures `best` compares; the full figures only for the one kept.
        (
            set_conflicts(graph, &at, L1I).share(),
            1.0 - calls.share(calls.within_4k),
        )
    };
    // Two halves at once, as `auto` runs its algorithms: a million functions take a while each.
    let (first, second) = tried.split_at(tried.len() / 2);
    let (mut figures, second) = join(
        || first.iter().map(run).collect::<Vec<_>>(),
        || second.iter().map(run).collect::<Vec<_>>(),
    );
    figures.extend(second);
    let mut candidates: Vec<PlacementCandidate> = tried
        .iter()
        .zip(figures)
        .map(
            |(&(alignment, padding), (icache_overflow, score))| PlacementCandidate {
                alignment,
                start_padding: padding,
                icache_overflow,
                score,
                chosen: false,
            },
        )
        .collect();
    let pick = best(&candidates);
    candidates[pick].chosen = true;
    let (alignment, padding) = tried[pick];
    let placement = ScriptPlacement {
        alignment,
        hot_offset: base.hot_offset + padding,
        ..base
    };
    PlacementChoice {
        placement,
        metrics: measure(graph, &place_as_linked(graph, order, &placement)),
        candidates,
    }
}

/// The first candidate unless another pays (see [`choose_placement`]).
fn best(candidates: &[PlacementCandidate]) -> usize {
    let base = &candidates[0];
    let score_bound = base.score + TIE * base.score.abs().max(f64::MIN_POSITIVE);
    let mut pick = 0;
    for (i, c) in candidates.iter().enumerate().skip(1) {
        let pays = c.icache_overflow < base.icache_overflow * (1.0 - TIE) && c.score <= score_bound;
        // Lower by more than float rounding: placements that model the same (paddings that only
        // move whole-line-aligned functions) keep the earliest, not whichever summed lower.
        if pays && c.icache_overflow < candidates[pick].icache_overflow * (1.0 - ROUNDING) {
            pick = i;
        }
    }
    pick
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::GraphBuilder;

    fn first(n: usize) -> Vec<FuncId> {
        (0..n).map(FuncId::from_index).collect()
    }

    /// Eight very hot 64 B functions, each alone on a line of L1i set 0 (cold 4032 B fillers
    /// between them), then a cold 32 B one and a warm 40 B one that starts 32 B into a line of
    /// set 0: it straddles sets 0 and 1, and its half in set 0 is the ninth line of an 8-way set.
    /// Aligned to its line (32 B of padding) it sits wholly in set 1.
    fn straddling() -> (Graph, Vec<FuncId>) {
        let mut b = GraphBuilder::default();
        for i in 0..8 {
            let hot = b.func(&format!("hot{i}"), 64);
            b.add_samples(hot, 1000);
            b.func(&format!("filler{i}"), 4096 - 64);
        }
        b.func("cold", 32);
        let warm = b.func("warm", 40);
        b.add_samples(warm, 10);
        (b.finish(), first(18))
    }

    #[test]
    fn alignment_is_chosen_where_the_model_says_it_pays() {
        let (g, order) = straddling();
        let choice = choose_placement(&g, &order, ScriptPlacement::default());
        assert_eq!(choice.candidates.len(), 2 * PADDINGS.len());
        let base = &choice.candidates[0];
        assert_eq!(
            (base.alignment, base.start_padding),
            (Alignment::AsCompiled, 0)
        );
        assert!(base.icache_overflow > 0.0, "{:?}", choice.candidates);
        assert_eq!(choice.placement.alignment, Alignment::CACHE_LINES);
        assert_eq!(choice.placement.hot_offset, 0);
        assert_eq!(choice.metrics.icache_overflow, 0.0);
        let chosen: Vec<_> = choice.candidates.iter().filter(|c| c.chosen).collect();
        assert_eq!(chosen.len(), 1);
        assert_eq!(chosen[0].alignment, Alignment::CACHE_LINES);
        // The warm function where the model put it is where the script's rule puts it.
        let at = place_as_linked(&g, &order, &choice.placement);
        assert_eq!(at[17].unwrap().0, 8 * 4096 + 64);
    }

    #[test]
    fn nothing_changes_where_no_alignment_pays() {
        // The same functions, hot ones a line apart: no set holds more than two hot lines.
        let mut b = GraphBuilder::default();
        for i in 0..8 {
            let hot = b.func(&format!("hot{i}"), 40);
            b.add_samples(hot, 1000);
        }
        let g = b.finish();
        let base = ScriptPlacement {
            hot_offset: 128,
            ..ScriptPlacement::default()
        };
        let choice = choose_placement(&g, &first(8), base);
        assert_eq!(choice.placement, base);
        assert!(choice.candidates[0].chosen, "{:?}", choice.candidates);
        assert!(choice.candidates.iter().all(|c| c.icache_overflow == 0.0));
    }

    #[test]
    fn a_candidate_that_pays_in_l1i_but_sends_more_calls_off_their_page_is_not_kept() {
        let candidate = |icache_overflow, score| PlacementCandidate {
            alignment: Alignment::AsCompiled,
            start_padding: 0,
            icache_overflow,
            score,
            chosen: false,
        };
        assert_eq!(best(&[candidate(0.10, 0.5), candidate(0.05, 0.6)]), 0);
        assert_eq!(best(&[candidate(0.10, 0.5), candidate(0.05, 0.502)]), 1);
        // Less than TIE better is no better.
        assert_eq!(best(&[candidate(0.10, 0.5), candidate(0.0995, 0.5)]), 0);
        // The lowest of those that pay, the earliest on a tie.
        let three = [
            candidate(0.10, 0.5),
            candidate(0.05, 0.5),
            candidate(0.04, 0.5),
            candidate(0.04, 0.5),
        ];
        assert_eq!(best(&three), 2);
    }
}
