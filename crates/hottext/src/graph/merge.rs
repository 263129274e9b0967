//! Merging profiles: this run's with the previous one, so that the layout follows code and usage
//! changes without jumping with every week's noise (weight = new + decay × previous), and a
//! fleet's, one per host and run, each weighted by its age (`hottext merge`, `pipeline merge`).
//! Each function's samples, each call's weight and each call site's weight are summed per
//! caller, callee and offset, each basic block's samples per function and block id, and each
//! block edge's count per function and blocks.
//!
//! Every profile must already use the same binary's names ([`crate::graph::fit`]), and
//! keep only the call sites of code that did not change.
//! Sizes, aliases and headers come from the first (newest) profile that has the function. An
//! older function or call whose decayed weight rounds to zero is dropped, so what stopped
//! running fades out instead of staying in the layout forever.
//!
//! A merged profile is one its reader takes: when the weighted counts would sum to more than
//! [`MAX_COUNT`], every weight is scaled down by one factor (`fitting_scale`); the
//! proportions, which are all a layout uses, stay.

use std::time::{Duration, SystemTime};

use foldhash::{HashMap, HashSet};

use crate::graph::counted_header::{CPU_SAMPLES, SAMPLES, SINGLE};
use crate::graph::{FuncId, Graph, GraphBuilder, MAX_COUNT};

/// The largest weight a part may have. Parts are weighed against each other (a fleet's by
/// age, at most 1); a million to one already lets one part drown the rest, and with it a
/// weight times a count stays a finite number.
pub const MAX_WEIGHT: f64 = 1e6;

/// `new + decay × old`; `decay` is between 0 and 1.
pub fn merge(new: &Graph, old: &Graph, decay: f64) -> Graph {
    merge_weighted(&[(new, 1.0), (old, decay)])
}

/// A part's weight factor at `age`: halved every `half_life_days`.
fn age_weight(age: Duration, half_life_days: f64) -> f64 {
    0.5f64.powf(age.as_secs_f64() / 86400.0 / half_life_days)
}

/// One profile of a merge weighed by age.
pub struct AgedPart<'a> {
    /// The profile, already fitted to the binary the merge is for.
    pub graph: &'a Graph,
    /// The weight asked for, before the age decay.
    pub weight: f64,
    /// When the profile's window ended; a part without one does not age.
    pub window_end: Option<SystemTime>,
}

/// What [`merge_aged`] made.
pub struct AgedMerge {
    /// The merged profile.
    pub graph: Graph,
    /// Each part's weight after its age decay, in the parts' order (before `scale`).
    pub weights: Vec<f64>,
    /// The factor every weight was scaled by to keep the counts readable (`fitting_scale`).
    pub scale: f64,
}

/// The fleet's merge (`hottext merge`, `pipeline merge`): each part weighed by its weight times
/// `age_weight` of its age at `now` (without `half_life_days`, no decay), then
/// `merge_weighted`, the first part the reference.
pub fn merge_aged(parts: &[AgedPart], now: SystemTime, half_life_days: Option<f64>) -> AgedMerge {
    let weights: Vec<f64> = parts
        .iter()
        .map(|p| match (half_life_days, p.window_end) {
            (Some(half_life), Some(end)) => {
                let age = now.duration_since(end).unwrap_or(Duration::ZERO);
                p.weight * age_weight(age, half_life)
            }
            _ => p.weight,
        })
        .collect();
    let weighted: Vec<(&Graph, f64)> = parts
        .iter()
        .map(|p| p.graph)
        .zip(weights.iter().copied())
        .collect();
    AgedMerge {
        graph: merge_weighted(&weighted),
        scale: fitting_scale(&weighted),
        weights,
    }
}

/// `Σ weight × part`: each part's samples, call weights and call-site weights scaled by its
/// weight (at least 0) and summed by name. The first part is the reference: its headers are
/// kept (those that count samples become the parts' weighted sums), and every one of its
/// functions; the others bring a function in only when it keeps
/// weight of its own or through a call. A function's size and aliases come from the first part
/// that has it. Scaled samples and calls round to the nearest count; sites round down, so that
/// a call's sites still fit in it.
pub(crate) fn merge_weighted(parts: &[(&Graph, f64)]) -> Graph {
    let mut b = GraphBuilder::default();
    if parts.is_empty() {
        return b.finish();
    }
    let scale = fitting_scale(parts);
    let parts: Vec<(&Graph, f64)> = parts
        .iter()
        .map(|&(g, w)| (g, w.clamp(0.0, MAX_WEIGHT) * scale))
        .collect();
    let parts = parts.as_slice();
    for (k, v) in summed_headers(parts) {
        b.push_header(&k, v);
    }
    let mut declared: HashMap<&str, FuncId> = HashMap::default();
    // Where each block lies, as the first part with it says.
    let mut block_places: HashMap<(FuncId, u32), (u64, u64)> = HashMap::default();
    for (index, &(part, weight)) in parts.iter().enumerate() {
        let scaled = |w: u64| (w as f64 * weight).round() as u64;
        let scaled_site = |w: u64| (w as f64 * weight).floor() as u64;
        let mut ids: Vec<Option<FuncId>> = vec![None; part.funcs.len()];
        let mut declare = |b: &mut GraphBuilder, i: usize| -> FuncId {
            if let Some(id) = ids[i] {
                return id;
            }
            let f = &part.funcs[i];
            let id = *declared.entry(f.name.as_str()).or_insert_with(|| {
                let id = b.func(&f.name, f.size);
                for a in &f.aliases {
                    b.alias(id, a);
                }
                id
            });
            ids[i] = Some(id);
            id
        };
        for (i, f) in part.funcs.iter().enumerate() {
            let w = scaled(f.samples);
            if w > 0 || index == 0 {
                let id = declare(&mut b, i);
                b.add_samples(id, w);
            }
        }
        for c in &part.calls {
            let w = scaled(c.weight);
            if w > 0 {
                let caller = declare(&mut b, c.caller.index());
                let callee = declare(&mut b, c.callee.index());
                b.add_call(caller, callee, w);
            }
        }
        for s in &part.sites {
            let w = scaled_site(s.weight);
            if w > 0 {
                let caller = declare(&mut b, s.caller.index());
                let callee = declare(&mut b, s.callee.index());
                b.add_site(caller, callee, s.offset, w);
            }
        }
        // A block that ran stays, with 0 samples where it had none or its samples scaled down
        // to none, as long as its function keeps samples (the functions above).
        let mut placed = HashSet::default();
        for block in &part.blocks {
            let w = scaled(block.samples);
            if w == 0 && index > 0 && scaled(part.funcs[block.func.index()].samples) == 0 {
                continue;
            }
            let func = declare(&mut b, block.func.index());
            let place = (block.offset, block.size);
            let first = *block_places.entry((func, block.block)).or_insert(place);
            // Another place is other code (a part not fitted to the same binary): its samples
            // would count the wrong bytes. The size is the first part's too, and a block past
            // it is left out by the builder.
            if first == place {
                b.add_block_samples(func, block.block, block.offset, block.size, w);
                placed.insert((block.func, block.block));
            }
        }
        // An edge of this part joins blocks of this part's code, so it counts only where both
        // its blocks were taken from the part.
        for e in &part.block_edges {
            let w = scaled(e.count);
            if w > 0 && placed.contains(&(e.func, e.from)) && placed.contains(&(e.func, e.to)) {
                let func = declare(&mut b, e.func.index());
                b.add_block_edge(func, e.from, e.to, w);
            }
        }
    }
    b.finish()
}

/// The factor, at most 1, that `merge_weighted` multiplies every weight (taken between 0 and
/// [`MAX_WEIGHT`]) by so that the merged samples and call weights each sum to at most
/// [`MAX_COUNT`], the most a reader takes. Rounding adds at most half a count to each record,
/// which the room left for them covers.
fn fitting_scale(parts: &[(&Graph, f64)]) -> f64 {
    let weighted = |total: fn(&Graph) -> u64| -> f64 {
        parts
            .iter()
            .map(|&(g, w)| total(g) as f64 * w.clamp(0.0, MAX_WEIGHT))
            .sum()
    };
    let records: usize = parts
        .iter()
        .map(|(g, _)| g.funcs.len() + g.calls.len() + g.blocks.len() + g.block_edges.len())
        .sum();
    let room = MAX_COUNT as f64 - records as f64;
    let most = weighted(Graph::total_samples)
        .max(weighted(Graph::total_call_weight))
        .max(weighted(Graph::total_block_samples))
        .max(weighted(Graph::total_block_edge_count));
    if most <= room {
        1.0
    } else {
        (room / most).max(0.0)
    }
}

/// The reference's headers (the first part's), with each that counts samples
/// ([`crate::graph::counted_header`]) replaced by the parts' weighted sum: a part without the
/// header counts none, except `samples`, which it counts as its functions' own. The
/// `cpu-samples` lines are summed per place, the most first.
fn summed_headers(parts: &[(&Graph, f64)]) -> Vec<(String, String)> {
    let reference = parts[0].0;
    let weighted = |count: u64, weight: f64| count as f64 * weight.max(0.0);
    let mut places: Vec<(String, f64)> = Vec::new();
    for &(part, weight) in parts {
        for (key, value) in part.headers() {
            let Some((n, place)) = value.split_once(' ').filter(|_| key == CPU_SAMPLES) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match places.iter_mut().find(|(p, _)| p == place) {
                Some((_, sum)) => *sum += weighted(n, weight),
                None => places.push((place.to_string(), weighted(n, weight))),
            }
        }
    }
    places.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut out: Vec<(String, String)> = Vec::new();
    for (key, value) in reference.headers() {
        if key == CPU_SAMPLES {
            if !out.iter().any(|(k, _)| k == CPU_SAMPLES) {
                out.extend(
                    places
                        .iter()
                        .map(|(place, sum)| (key.clone(), format!("{} {place}", capped(*sum)))),
                );
            }
        } else if SINGLE.contains(&key.as_str()) {
            let sum: f64 = parts
                .iter()
                .map(|&(part, weight)| {
                    let own = part.header(key).and_then(|s| s.parse::<u64>().ok());
                    let own = match own {
                        None if key == SAMPLES => Some(part.total_samples()),
                        own => own,
                    };
                    weighted(own.unwrap_or(0), weight)
                })
                .sum();
            out.push((key.clone(), capped(sum).to_string()));
        } else {
            out.push((key.clone(), value.clone()));
        }
    }
    out
}

/// A summed header count, rounded, at most [`MAX_COUNT`] (a header may state any number).
fn capped(sum: f64) -> u64 {
    (sum.round() as u64).min(MAX_COUNT)
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
