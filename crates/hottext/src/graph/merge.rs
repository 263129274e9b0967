//! Merging profiles: this run's with the previous one, so that the layout follows code and usage
//! changes without jumping with every week's noise (weight = new + decay × previous), and a
//! fleet's, one per host and run, each weighted by its age (`hottext merge`, `pipeline merge`).
//! Each function's samples, each call's weight and each call site's weight are summed per
//! caller, callee and offset.
//!
//! Every profile must already use the same binary's names ([`crate::graph::fit`]), and
//! keep only the call sites of code that did not change.
//! Sizes, aliases and headers come from the first (newest) profile that has the function. An
//! older function or call whose decayed weight rounds to zero is dropped, so what stopped
//! running fades out instead of staying in the layout forever.
//!
//! A merged profile is one its reader takes: when the weighted counts would sum to more than
//! [`MAX_COUNT`], every weight is scaled down by one factor ([`fitting_scale`]); the
//! proportions, which are all a layout uses, stay.

use std::time::{Duration, SystemTime};

use foldhash::HashMap;

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
    /// The factor every weight was scaled by to keep the counts readable ([`fitting_scale`]).
    pub scale: f64,
}

/// The fleet's merge (`hottext merge`, `pipeline merge`): each part weighed by its weight times
/// [`age_weight`] of its age at `now` (without `half_life_days`, no decay), then
/// [`merge_weighted`], the first part the reference.
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
    }
    b.finish()
}

/// The factor, at most 1, that [`merge_weighted`] multiplies every weight (taken between 0 and
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
        .map(|(g, _)| g.funcs.len() + g.calls.len())
        .sum();
    let room = MAX_COUNT as f64 - records as f64;
    let most = weighted(Graph::total_samples).max(weighted(Graph::total_call_weight));
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
mod tests {
    use super::*;

    #[test]
    fn weight_halves_every_half_life() {
        let day = Duration::from_secs(86400);
        assert_eq!(age_weight(Duration::ZERO, 7.0), 1.0);
        assert!((age_weight(day * 7, 7.0) - 0.5).abs() < 1e-12);
        assert!((age_weight(day * 14, 7.0) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn an_aged_merge_decays_each_weight_by_its_age_at_now_and_only_with_a_half_life() {
        let g = graph("fn a 16 100\n");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(86400 * 100);
        let week_old = now - Duration::from_secs(86400 * 7);
        let parts = [
            AgedPart {
                graph: &g,
                weight: 2.0,
                window_end: Some(now),
            },
            AgedPart {
                graph: &g,
                weight: 2.0,
                window_end: Some(week_old),
            },
            AgedPart {
                graph: &g,
                weight: 2.0,
                window_end: None,
            },
        ];
        let aged = merge_aged(&parts, now, Some(7.0));
        assert_eq!(aged.weights, [2.0, 1.0, 2.0]);
        assert_eq!(aged.graph.funcs()[0].samples, 500);
        assert_eq!(merge_aged(&parts, now, None).weights, [2.0, 2.0, 2.0]);
    }

    fn graph(text: &str) -> Graph {
        Graph::read(format!("# hottext profile v2\n{text}").as_bytes()).unwrap()
    }

    fn text(g: &Graph) -> String {
        let mut out = Vec::new();
        g.write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn weights_are_new_plus_decayed_old() {
        let new = graph("fn a 16 10\nfn b 32 20\ncall a b 20\nsite a b 4 15\n");
        let old = graph(
            "fn a 12 100\nfn b 32 40\nfn c 8 7\ncall a b 40\nsite a b 4 20\nsite a b 9 11\n\
             call b c 7\nsite b c 1 3\nsite b c 2 3\n",
        );
        let m = merge(&new, &old, 0.5);
        // Sites sum per offset and round down: 3 × 0.5 → 1 each, within b → c's 4.
        assert_eq!(
            text(&m),
            "# hottext profile v2\nfn a 16 60\nfn b 32 40\nfn c 8 4\n\
             call a b 40\nsite a b 4 25\nsite a b 9 5\ncall b c 4\nsite b c 1 1\nsite b c 2 1\n"
        );
    }

    #[test]
    fn three_hosts_sum_by_their_weights() {
        let a = graph("fn main 16 100\nfn f 8 10\ncall main f 10\n");
        let b = graph("fn main 20 50\nfn g 8 40\ncall main g 40\n");
        let c = graph("fn main 16 10\nfn f 8 30\ncall main f 30\nsite main f 4 30\n");
        let m = merge_weighted(&[(&a, 1.0), (&b, 0.5), (&c, 0.25)]);
        // main: 100 + 25 + 2.5 → 128 (rounded); its size from the first part.
        assert_eq!(
            text(&m),
            "# hottext profile v2\nfn f 8 18\nfn g 8 20\nfn main 16 128\n\
             call main f 18\nsite main f 4 7\ncall main g 20\n"
        );
        assert_eq!(text(&merge_weighted(&[(&a, 1.0)])), text(&a));
    }

    #[test]
    fn the_samples_header_is_the_weighted_sum_of_the_parts() {
        let a = graph("# samples: 3719\nfn main 16 100\n");
        let b = graph("# samples: 3685\nfn main 16 40\n");
        let b_bare = graph("fn main 16 40\n");
        assert_eq!(
            merge_weighted(&[(&a, 1.0), (&b, 1.0)]).header(SAMPLES),
            Some("7404")
        );
        // A part without the header counts its functions' samples.
        let m = merge_weighted(&[(&a, 1.0), (&b_bare, 0.5)]);
        assert_eq!(m.header(SAMPLES), Some("3739"));
        // No header to correct: none is made up.
        let m = merge_weighted(&[(&b_bare, 1.0), (&a, 1.0)]);
        assert_eq!(m.header(SAMPLES), None);
    }

    #[test]
    fn zero_decay_is_the_new_profile_and_faded_functions_drop_out() {
        let new = graph("fn a 16 10\n");
        let old = graph("fn gone 8 1\nfn a 16 5\n");
        assert_eq!(text(&merge(&new, &old, 0.0)), text(&new));
        // 1 × 0.4 rounds to 0: `gone` fades out.
        assert_eq!(
            text(&merge(&new, &old, 0.4)),
            "# hottext profile v2\nfn a 16 12\n"
        );
    }

    #[test]
    fn headers_that_count_samples_are_weighted_sums_and_places_sum_by_name() {
        let a = graph(
            "# build-id: ab\n# process-samples: 1000\n# cpu-samples: 600 /lib/libc.so.6\n\
             # cpu-samples: 400 [binary]\n# tail-call-weight: 10\nfn main 16 400\n",
        );
        let b = graph(
            "# build-id: cd\n# process-samples: 500\n# cpu-samples: 450 [binary]\n\
             # cpu-samples: 50 [kernel]\nfn main 16 450\n",
        );
        let m = merge_weighted(&[(&a, 1.0), (&b, 2.0)]);
        let headers: Vec<String> = m
            .headers()
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        assert_eq!(
            headers,
            [
                "build-id: ab",
                "process-samples: 2000",
                "cpu-samples: 1300 [binary]",
                "cpu-samples: 600 /lib/libc.so.6",
                "cpu-samples: 100 [kernel]",
                "tail-call-weight: 10",
            ]
        );
    }

    #[test]
    fn merged_counts_stay_within_what_the_reader_takes() {
        let max = MAX_COUNT;
        let a = graph(&format!(
            "# samples: {max}\nfn a 16 {max}\nfn b 16 0\ncall a b {max}\n"
        ));
        let b = graph(&format!("fn a 16 {}\nfn b 16 {}\n", max / 2, max / 2));
        for weights in [(1.0, 1.0), (1e300, 1.0), (1.0, f64::MAX)] {
            let m = merge_weighted(&[(&a, weights.0), (&b, weights.1)]);
            let again = Graph::read(text(&m).as_bytes()).unwrap_or_else(|e| {
                panic!(
                    "{weights:?}: the reader refuses the merge: {e}\n{}",
                    text(&m)
                )
            });
            assert!(again.total_samples() <= max, "{weights:?}");
            assert!(m.header(SAMPLES).unwrap().parse::<u64>().unwrap() <= max);
        }
        // Equal weights: scaled down together, a still has 3 times b's samples.
        let m = merge_weighted(&[(&a, 1.0), (&b, 1.0)]);
        let (fa, fb) = (m.funcs[0].samples as f64, m.funcs[1].samples as f64);
        assert!(((fa / fb) - 3.0).abs() < 1e-6, "{fa} {fb}");
        assert!(fitting_scale(&[(&a, 1.0), (&b, 1.0)]) < 0.67);
        assert_eq!(fitting_scale(&[(&a, 0.5)]), 1.0);
    }
}
