//! The profiles a run keeps in the store: the run's own, written with the headers that say what
//! it is, and the previous one the meta file names, fitted to the current binary for the merge.

use crate::binary::fingerprint::Fingerprints;
use crate::binary::Binary;
use crate::graph::fit::{fit_to_prints, Fitted};
use crate::graph::Graph;
use crate::store::meta::{self, Meta, MetaError};
use crate::store::{Put, Store};

use super::config::Config;
use super::{gather, service, PipelineError, Previous};

/// The run's profile in the configured store: the store, what was put, and the meta file
/// that names it.
pub(super) struct Stored {
    pub(super) store: Store,
    pub(super) put: Put,
    pub(super) meta: Meta,
}

/// Puts the run's profile ([`stored_profile`]) in the configured store.
pub(super) fn store_profile(
    g: &mut gather::Gathered,
    config: &Config,
) -> Result<Stored, PipelineError> {
    let version = service::version(config);
    let bytes = stored_profile(g, config, &version)?;
    let store = Store::open(&config.store.url)?;
    let put = store.put(&bytes)?;
    let meta = Meta {
        object: put.hash,
        store: crate::store::location(&config.store.url).to_string(),
        size: put.size,
        format: crate::graph::declared_format(&bytes),
        samples: g.samples,
        window_start: g.window_start,
        window_end: g.window_end,
        binary_build_id: g.binary.build_id_hex(),
        binary_version: version,
    };
    Ok(Stored { store, put, meta })
}

/// The profile as the store keeps it: `g`'s graph with the headers that say what it is and the
/// code fingerprints of its binary, written and read back.
fn stored_profile(
    g: &mut gather::Gathered,
    config: &Config,
    version: &str,
) -> Result<Vec<u8>, PipelineError> {
    let graph = &mut g.graph;
    graph.set_header("service", &config.service.name);
    graph.set_header("binary-version", version);
    graph.set_header("window-start", meta::time(g.window_start));
    graph.set_header("window-end", meta::time(g.window_end));
    graph.set_header("samples", g.samples);
    crate::graph::fit::add_fingerprints(graph, &g.prints);
    let mut bytes = Vec::new();
    graph
        .write(&mut bytes)
        .map_err(|source| PipelineError::Io {
            what: "cannot write the profile".into(),
            source,
        })?;
    // Every build after this one fetches what is stored: a profile the reader refuses (a v2
    // writer once wrote names with spaces as they were) must never get there.
    Graph::read(bytes.as_slice()).map_err(PipelineError::Unreadable)?;
    Ok(bytes)
}

/// The previous profile fitted to `binary`, and what to say about it. Problems with it are
/// reported, not fatal: a missing old object must not stop the refresh that replaces it.
pub(super) fn previous_profile(
    meta: Option<Result<Meta, MetaError>>,
    binary: &Binary,
    prints: &Fingerprints,
    config: &Config,
) -> (Option<Previous>, Option<Graph>) {
    let not_merged = |object: Option<String>, note: String| Previous {
        object,
        matched_fraction: 0.0,
        matched_by_code_fraction: 0.0,
        merged: false,
        note: Some(note),
    };
    let meta = match meta {
        None => return (None, None),
        Some(Err(e)) => {
            return (
                Some(not_merged(
                    None,
                    format!("the meta file is unreadable: {e}"),
                )),
                None,
            )
        }
        Some(Ok(m)) => m,
    };
    let object = Some(meta.object.to_string());
    // The previous profile is read from the configured store, with the configured credentials:
    // a meta file that names another store (a one-line change in a reviewed file) is not
    // followed there.
    if crate::store::location(&meta.store) != crate::store::location(&config.store.url) {
        let note = format!(
            "the meta file names the store '{}', the configuration '{}': not read from there",
            meta.store, config.store.url
        );
        return (Some(not_merged(object, note)), None);
    }
    let fetched = Store::open(&config.store.url)
        .and_then(|s| s.get(&meta.object))
        .map_err(|e| e.to_string())
        .and_then(|bytes| Graph::read(bytes.as_slice()).map_err(|e| e.to_string()));
    let old = match fetched {
        Ok(g) => g,
        Err(e) => return (Some(not_merged(object, e)), None),
    };
    let Fitted {
        graph: old,
        matched,
        ..
    } = fit_to_prints(&old, binary, prints);
    let share = matched.share();
    let by_code = matched.by_code as f64 / matched.total.max(1) as f64;
    let merged = share >= config.gate.min_previous_matched;
    let note = (!merged).then(|| {
        format!(
            "only {:.1}% of its weight matches the current binary (at least {:.0}%): not merged",
            100.0 * share,
            100.0 * config.gate.min_previous_matched
        )
    });
    let previous = Previous {
        object,
        matched_fraction: share,
        matched_by_code_fraction: by_code,
        merged,
        note,
    };
    (Some(previous), Some(old))
}
