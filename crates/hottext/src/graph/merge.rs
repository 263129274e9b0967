//! Merging this run's profile with the previous one, so that the layout follows code and usage
//! changes without jumping with every week's noise: weight = new + decay × previous, for each
//! function's samples, each call's weight and each call site's weight (summed per caller,
//! callee and offset).
//!
//! The previous profile must already use the current binary's names ([`crate::pipeline::rematch`]), and
//! keep only the call sites of code that did not change.
//! Sizes, aliases and headers come from the new profile where it has the function. A previous
//! function or call whose decayed weight rounds to zero is dropped, so what stopped running
//! fades out instead of staying in the layout forever.

use foldhash::HashMap;

use crate::graph::{FuncId, Graph, GraphBuilder};

/// `new + decay × old`; `decay` is between 0 and 1.
pub fn merge(new: &Graph, old: &Graph, decay: f64) -> Graph {
    let decayed = |w: u64| (w as f64 * decay).round() as u64;
    // Sites round down: the floors of a call's sites add up to no more than its decayed weight,
    // so the sites still fit in their call.
    let decayed_site = |w: u64| (w as f64 * decay).floor() as u64;
    let mut b = GraphBuilder::default();
    for (k, v) in &new.headers {
        b.header(k, v);
    }
    let mut new_ids: Vec<FuncId> = Vec::with_capacity(new.funcs.len());
    let mut in_new: HashMap<&str, FuncId> = HashMap::default();
    for f in &new.funcs {
        let id = b.func(&f.name, f.size);
        b.add_samples(id, f.samples);
        for a in &f.aliases {
            b.alias(id, a);
        }
        new_ids.push(id);
        in_new.insert(&f.name, id);
    }
    for c in &new.calls {
        b.add_call(
            new_ids[c.caller.index()],
            new_ids[c.callee.index()],
            c.weight,
        );
    }
    for s in &new.sites {
        let (caller, callee) = (new_ids[s.caller.index()], new_ids[s.callee.index()]);
        b.add_site(caller, callee, s.offset, s.weight);
    }

    // Previous functions come in when they keep weight of their own or through a call.
    let mut old_ids: Vec<Option<FuncId>> = vec![None; old.funcs.len()];
    let mut declare = |b: &mut GraphBuilder, i: usize| -> FuncId {
        if let Some(id) = old_ids[i] {
            return id;
        }
        let f = &old.funcs[i];
        let id = match in_new.get(f.name.as_str()) {
            Some(&id) => id,
            None => {
                let id = b.func(&f.name, f.size);
                for a in &f.aliases {
                    b.alias(id, a);
                }
                id
            }
        };
        old_ids[i] = Some(id);
        id
    };
    for (i, f) in old.funcs.iter().enumerate() {
        let w = decayed(f.samples);
        if w > 0 {
            let id = declare(&mut b, i);
            b.add_samples(id, w);
        }
    }
    for c in &old.calls {
        let w = decayed(c.weight);
        if w > 0 {
            let caller = declare(&mut b, c.caller.index());
            let callee = declare(&mut b, c.callee.index());
            b.add_call(caller, callee, w);
        }
    }
    for s in &old.sites {
        let w = decayed_site(s.weight);
        if w > 0 {
            let caller = declare(&mut b, s.caller.index());
            let callee = declare(&mut b, s.callee.index());
            b.add_site(caller, callee, s.offset, w);
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
