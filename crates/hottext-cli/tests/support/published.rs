//! A profile of the small service, stored and named by a meta file, as the pipeline leaves it:
//! what `fetch` and the build integrations start from.

use std::path::Path;

use super::build_service;
use crate::common::store_put;
use hottext::binary::Binary;
use hottext::graph::fit::{fit_any_build, CodePrints};
use hottext::graph::Graph;
use hottext::store::ObjectHash;

/// What a recording of the service looks like: handler_a hottest, then b and c.
pub const PROFILE: &str = "# hottext profile v1\n\
    fn main 64 1\nfn serve 64 20\nfn handler_a 64 30\nfn handler_b 64 20\nfn handler_c 64 10\n\
    fn leaf0 32 8\nfn leaf1 32 8\nfn leaf4 32 5\nfn leaf7 32 5\n\
    call main serve 20\ncall serve handler_a 30\ncall serve handler_b 20\ncall serve handler_c 10\n\
    call handler_a leaf0 8\ncall handler_a leaf1 8\ncall handler_b leaf4 5\ncall handler_c leaf7 5\n";

/// The profile with the code fingerprints of `binary`, as the pipeline writes it.
pub fn profile_of(binary: &Path, text: &str) -> String {
    let bin = Binary::open(binary).unwrap();
    // Sizes from the symbol table and the fingerprints, as `hottext profile` and the pipeline
    // give them.
    let profile = Graph::read(text.as_bytes()).unwrap();
    let fitted = fit_any_build(&profile, &bin, CodePrints::Eager, 1.0).unwrap();
    let mut g = fitted.graph;
    assert!(
        fitted.matched.unmatched.is_empty(),
        "{:?}",
        fitted.matched.unmatched
    );
    if let Some(id) = bin.build_id_hex() {
        g.set_header("build-id", id);
    }
    let mut out = Vec::new();
    g.write(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Builds the service, stores its profile and writes `svc.meta`; returns the object's hash.
pub fn publish(dir: &Path) -> ObjectHash {
    let base = build_service(dir, "base", &[]);
    let text = profile_of(&base, PROFILE);
    std::fs::write(dir.join("svc.profile"), &text).unwrap();
    store_put(dir, "svc.profile", "svc.meta");
    ObjectHash::of(text.as_bytes())
}
