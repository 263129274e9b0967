//! Using a profile on a binary that changed since it was taken.
//!
//! Functions are matched by name (or alias) first. Functions whose name is gone (renamed,
//! moved into another namespace, a changed static's `;file` qualifier) are matched by a
//! fingerprint of their code ([`crate::binary::fingerprint`]). A fingerprint two functions
//! share is ambiguous and matches nothing.
//!
//! Profiles carry their functions' fingerprints as `# fn-hash: <name> <hex>` header lines,
//! which readers that do not know them ignore.
//!
//! Call sites are offsets into their caller's code, so they are kept only where that code is
//! the same: every site when the profile's build-id is the binary's (the same build), else the
//! sites of callers whose fingerprint, size included, is the binary's function's. The others'
//! weight stays in their calls, without a site, and is counted in [`Matched::sites_dropped`].
//! The fingerprint ignores displacements, so a caller that kept its instructions but changed a
//! displacement's width could keep sites a few bytes off: noise to the layout.

use foldhash::HashMap;

use serde::Serialize;

use crate::binary::fingerprint::{Fingerprint, Fingerprints};
use crate::binary::Binary;
use crate::graph::{Graph, GraphBuilder};

/// The profile header key of a function's fingerprint.
pub(crate) const FN_HASH: &str = "fn-hash";

/// Adds `# fn-hash` headers for the graph's functions that `prints` knows, replacing any.
pub(crate) fn add_fingerprints(graph: &mut Graph, prints: &Fingerprints) {
    let mut lines: Vec<String> = graph
        .funcs()
        .iter()
        .filter_map(|f| {
            let p = prints.get(&f.name)?;
            Some(format!(
                "{} {:016x}",
                crate::graph::escaped(&f.name),
                p.hash
            ))
        })
        .collect();
    lines.sort();
    graph.set_headers(FN_HASH, lines);
}

/// How a profile's weight maps onto a binary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Matched {
    /// Self samples of the profile's functions.
    pub total: u64,
    /// Of `total`, the samples of functions found by name (or alias).
    pub by_name: u64,
    /// Of `total`, the samples of functions found by their code under another name.
    pub by_code: u64,
    /// Functions matched by code under another name: (profile name, binary name).
    pub renamed: Vec<(String, String)>,
    /// Functions with samples that the binary lacks, hottest first.
    pub unmatched: Vec<String>,
    /// Weight of the call sites left out because their caller's code changed.
    pub sites_dropped: u64,
    /// Functions whose block counts were left out because their code or the binary's block
    /// map differs from the profile's (profile names).
    pub blocks_dropped: Vec<String>,
}

impl Matched {
    /// Share of the profile's weight that the binary has, 0 to 1 (1 for an empty profile).
    pub fn share(&self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            (self.by_name + self.by_code) as f64 / self.total as f64
        }
    }
}

/// `profile` with its functions renamed to `binary`'s names and the unmatched left out, and how
/// much of its weight matched. Sizes come from the binary.
pub(crate) fn rematch(profile: &Graph, binary: &Binary, prints: &Fingerprints) -> (Graph, Matched) {
    let by_name = binary.index_by_name();
    let mut by_print: HashMap<Fingerprint, Option<usize>> = HashMap::default();
    for (i, f) in binary.functions.iter().enumerate() {
        if let Some(p) = prints.get(&f.name) {
            by_print
                .entry(*p)
                .and_modify(|slot| *slot = None) // shared: ambiguous
                .or_insert(Some(i));
        }
    }
    // `<name> <hex>`: the name escaped as in `fn` lines (older profiles wrote it raw, which the
    // last space still separates from the hex).
    let profile_prints: HashMap<String, &str> = profile
        .headers()
        .iter()
        .filter(|(k, _)| k == FN_HASH)
        .filter_map(|(_, v)| v.rsplit_once(' '))
        .map(|(name, hex)| {
            let name = crate::graph::unescaped(name).map_or(name.into(), |n| n.into_owned());
            (name, hex)
        })
        .collect();
    // A profile fingerprint shared by two of its functions is ambiguous too.
    let mut print_uses: HashMap<Fingerprint, u32> = HashMap::default();
    let print_of = |name: &str, size: u64| {
        profile_prints
            .get(name)
            .and_then(|hex| Fingerprint::parse_hex(hex, size))
    };
    for f in profile.funcs() {
        if let Some(p) = print_of(&f.name, f.size) {
            *print_uses.entry(p).or_default() += 1;
        }
    }

    let mut matched = Matched::default();
    let mut target: Vec<Option<usize>> = Vec::with_capacity(profile.funcs().len());
    for f in profile.funcs() {
        matched.total += f.samples;
        let named = std::iter::once(&f.name)
            .chain(&f.aliases)
            .find_map(|n| by_name.get(n.as_str()).copied());
        let found = match named {
            Some(i) => {
                matched.by_name += f.samples;
                Some(i)
            }
            None => {
                let by_code = print_of(&f.name, f.size)
                    .filter(|p| print_uses.get(p) == Some(&1))
                    .and_then(|p| by_print.get(&p).copied().flatten());
                match by_code {
                    Some(i) => {
                        matched.by_code += f.samples;
                        matched
                            .renamed
                            .push((f.name.clone(), binary.functions[i].name.clone()));
                    }
                    None if f.samples > 0 => matched.unmatched.push(f.name.clone()),
                    None => {}
                }
                by_code
            }
        };
        target.push(found);
    }
    // Hottest first. A look-up table, not a search per comparison: 40 000 missing functions
    // once took 14.6 s that way.
    let samples_of: HashMap<&str, u64> = profile
        .funcs()
        .iter()
        .map(|f| (f.name.as_str(), f.samples))
        .collect();
    matched
        .unmatched
        .sort_by_key(|n| std::cmp::Reverse(samples_of.get(n.as_str()).copied().unwrap_or(0)));

    let mut b = GraphBuilder::default();
    for (key, value) in profile.headers() {
        if key != FN_HASH {
            b.header(key, value);
        }
    }
    let same_build = binary.is_build_of(profile.header("build-id"));
    let mut ids = vec![None; profile.funcs().len()];
    // Whether the sites of the profile's function `i` still point into the same code.
    let mut same_code = vec![same_build; profile.funcs().len()];
    // Whether both fingerprints are known and differ: the blocks changed.
    let mut code_changed = vec![false; profile.funcs().len()];
    for (i, f) in profile.funcs().iter().enumerate() {
        if let Some(t) = target[i] {
            let bf = &binary.functions[t];
            let (theirs, ours) = (print_of(&f.name, f.size), prints.get(&bf.name));
            same_code[i] |= theirs.is_some_and(|p| ours == Some(&p));
            code_changed[i] = !same_build && theirs.zip(ours).is_some_and(|(p, q)| p != *q);
            let id = b.func(&bf.name, bf.size);
            b.add_samples(id, f.samples);
            for a in &bf.aliases {
                b.alias(id, a);
            }
            ids[i] = Some(id);
        }
    }
    for c in profile.calls() {
        if let (Some(a), Some(z)) = (ids[c.caller.index()], ids[c.callee.index()]) {
            b.add_call(a, z, c.weight);
        }
    }
    for s in profile.sites() {
        match (ids[s.caller.index()], ids[s.callee.index()]) {
            (Some(a), Some(z)) if same_code[s.caller.index()] => {
                b.add_site(a, z, s.offset, s.weight)
            }
            (Some(_), Some(_)) => matched.sites_dropped += s.weight,
            _ => {} // the call is gone too
        }
    }
    let fitted: Vec<_> = target.iter().zip(&ids).map(|(t, id)| t.zip(*id)).collect();
    matched.blocks_dropped =
        super::blocks::fit_blocks(profile, binary, &fitted, &code_changed, &mut b);
    let mut graph = b.finish();
    add_fingerprints(&mut graph, prints);
    (graph, matched)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::binary::{Function, StatedAddr};

    /// This test program with `funcs` (name, size) as its functions, 4 KiB apart from 0x1000.
    pub(in crate::graph::fit) fn binary(funcs: &[(&str, u64)]) -> Binary {
        let mut b = Binary::parse(
            std::path::Path::new("self"),
            std::fs::read(std::env::current_exe().unwrap()).unwrap(),
        )
        .unwrap();
        b.functions = funcs
            .iter()
            .enumerate()
            .map(|(i, (n, size))| Function {
                start: StatedAddr(0x1000 * (i as u64 + 1)),
                size: *size,
                name: n.to_string(),
                aliases: vec![],
            })
            .collect();
        b
    }

    #[test]
    fn renamed_function_is_matched_by_code_and_unknown_ones_reported() {
        let profile = Graph::read(
            "# hottext profile v1\n# fn-hash: old_name 00000000000000aa\n\
             fn main 10 10\nfn old_name 32 60\nfn gone 8 30\n\
             call main old_name 60\ncall main gone 30\n"
                .as_bytes(),
        )
        .unwrap();
        let bin = binary(&[("main", 12), ("new_name", 32)]);
        let prints: HashMap<String, Fingerprint> = [(
            "new_name".to_string(),
            Fingerprint {
                size: 32,
                hash: 0xaa,
            },
        )]
        .into_iter()
        .collect::<Fingerprints>();
        let (g, m) = rematch(&profile, &bin, &prints);
        assert_eq!((m.total, m.by_name, m.by_code), (100, 10, 60));
        assert!((m.share() - 0.7).abs() < 1e-9);
        assert_eq!(
            m.renamed,
            [("old_name".to_string(), "new_name".to_string())]
        );
        assert_eq!(m.unmatched, ["gone"]);
        let names: Vec<&str> = g.funcs().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["main", "new_name"]);
        assert_eq!(g.funcs()[0].size, 12, "sizes come from the binary");
        assert_eq!(g.calls().len(), 1);
        assert_eq!(g.calls()[0].weight, 60);
    }

    #[test]
    fn fingerprints_of_names_with_spaces_survive_writing_and_reading() {
        // A Go-style name: its `# fn-hash` header once split at the name's own space.
        let mut g = Graph::read("# hottext profile v3\nfn old%20fn(x) 32 60\n".as_bytes()).unwrap();
        let print = Fingerprint {
            size: 32,
            hash: 0xaa,
        };
        add_fingerprints(
            &mut g,
            &[("old fn(x)".to_string(), print)]
                .into_iter()
                .collect::<Fingerprints>(),
        );
        let mut text = Vec::new();
        g.write(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("# fn-hash: old%20fn(x) 00000000000000aa\n"),
            "{text}"
        );
        let profile = Graph::read(text.as_bytes()).unwrap();
        let bin = binary(&[("new_name", 32)]);
        let (_, m) = rematch(
            &profile,
            &bin,
            &[("new_name".to_string(), print)]
                .into_iter()
                .collect::<Fingerprints>(),
        );
        assert_eq!(
            m.renamed,
            [("old fn(x)".to_string(), "new_name".to_string())]
        );
    }

    #[test]
    fn many_missing_functions_are_reported_hottest_first_in_linear_time() {
        let mut text = String::from("# hottext profile v1\nfn main 10 10\n");
        for i in 0..40_000 {
            text += &format!("fn gone_{i} 8 {}\n", 1 + i % 97);
        }
        let profile = Graph::read(text.as_bytes()).unwrap();
        let bin = binary(&[("main", 12)]);
        let started = std::time::Instant::now();
        let (_, matched) = rematch(&profile, &bin, &HashMap::default());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(matched.unmatched.len(), 40_000);
        assert_eq!(matched.unmatched[0], "gone_96");
    }

    #[test]
    fn shared_fingerprint_matches_nothing() {
        let profile = Graph::read(
            "# hottext profile v1\n# fn-hash: old 00000000000000aa\nfn old 32 5\n".as_bytes(),
        )
        .unwrap();
        let bin = binary(&[("twin_a", 32), ("twin_b", 32)]);
        let p = Fingerprint {
            size: 32,
            hash: 0xaa,
        };
        let prints: HashMap<String, Fingerprint> =
            [("twin_a".to_string(), p), ("twin_b".to_string(), p)]
                .into_iter()
                .collect::<Fingerprints>();
        let (_, m) = rematch(&profile, &bin, &prints);
        assert_eq!(m.by_code, 0);
        assert_eq!(m.unmatched, ["old"]);
    }

    #[test]
    fn call_sites_stay_only_where_the_callers_code_is_the_same() {
        let text = |build_id: &str| {
            format!(
                "# hottext profile v2\n# build-id: {build_id}\n# fn-hash: helper 00000000000000bb\n\
                 fn helper 32 60\nfn leaf 8 30\nfn main 10 10\n\
                 call helper leaf 30\nsite helper leaf 20 30\ncall main helper 60\nsite main helper 4 60\n"
            )
        };
        // main grew (and has no fingerprint); helper's code is the same.
        let bin = binary(&[("main", 12), ("helper", 32), ("leaf", 8)]);
        let prints: HashMap<String, Fingerprint> = [(
            "helper".to_string(),
            Fingerprint {
                size: 32,
                hash: 0xbb,
            },
        )]
        .into_iter()
        .collect::<Fingerprints>();
        let sites = |g: &Graph| -> Vec<(String, u64)> {
            g.sites()
                .iter()
                .map(|s| (g.funcs()[s.caller].name.clone(), s.offset))
                .collect()
        };
        let other_build = Graph::read(text("00").as_bytes()).unwrap();
        let (g, m) = rematch(&other_build, &bin, &prints);
        assert_eq!(sites(&g), [("helper".to_string(), 20)]);
        assert_eq!(m.sites_dropped, 60);
        assert_eq!(g.calls().len(), 2, "calls stay, with or without sites");

        let build_id = bin.build_id_hex().expect("the test binary has a build-id");
        let same_build = Graph::read(text(&build_id).as_bytes()).unwrap();
        let (g, m) = rematch(&same_build, &bin, &prints);
        assert_eq!(sites(&g).len(), 2, "the same build keeps every site");
        assert_eq!(m.sites_dropped, 0);
    }
}
