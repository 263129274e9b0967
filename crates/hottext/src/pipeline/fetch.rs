//! The build's side: the meta file names a profile; fetch it, check it, and fit it to the
//! binary being built.
//!
//! Checks, in order: the meta file parses (its hash is well formed); the store has the object;
//! its bytes hash to the name ([`crate::store::Store::get`]); its size is the meta file's; it
//! is a profile; its build-id header is the one the meta file names (a hash that names another
//! profile is caught here); enough of its weight matches the binary ([`crate::graph::fit`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::binary::Binary;
use crate::graph::fit::{fit_any_build, CodePrints, FitError, Fitted, Matched};
use crate::graph::{Graph, GraphError};
use crate::store::meta::{Meta, MetaError};
use crate::store::{ObjectHash, Store, StoreError};

/// A profile fitted to a binary.
#[derive(Debug)]
pub struct Fetched {
    /// The meta file that named the profile.
    pub meta: Meta,
    /// The profile with the binary's names; functions it lacks are left out.
    pub graph: Graph,
    /// How much of the profile's weight the binary has.
    pub matched: Matched,
}

/// Why a build cannot have its profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// No meta file: nothing was published yet.
    #[error("there is no meta file {path}: no profile has been published for this service yet")]
    NoMeta {
        /// The meta file.
        path: PathBuf,
    },
    /// The meta file cannot be read or is malformed.
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// The store cannot give the object.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The object's size is not the one the meta file states.
    #[error("store object {hash} has {actual} bytes but the meta file says {expected}: the meta file names the wrong object")]
    SizeMismatch {
        /// The object.
        hash: ObjectHash,
        /// The size the meta file states.
        expected: u64,
        /// The object's size.
        actual: u64,
    },
    /// The object is not a readable profile.
    #[error("store object {hash} is not a hottext profile: {source}")]
    NotAProfile {
        /// The object.
        hash: ObjectHash,
        /// Why it does not read.
        source: GraphError,
    },
    /// The meta file names a store with options.
    #[error("{path} names the store '{store}' with options (after '?'): a meta file says where the profile is, never how to reach it, because a one-line change to it would send this build's credentials elsewhere; give the endpoint and its options with --store")]
    StoreOptionsInMeta {
        /// The meta file.
        path: PathBuf,
        /// The store it names.
        store: String,
    },
    /// The profile's build-id is not the one the meta file states.
    #[error("store object {hash} is a profile of build-id {profile}, but the meta file says {meta}: the meta file names the wrong object")]
    Disagrees {
        /// The object.
        hash: ObjectHash,
        /// The build-id the meta file states.
        meta: String,
        /// The profile's build-id.
        profile: String,
    },
    /// The binary's code cannot be read to fingerprint it.
    #[error("cannot read the code of {path}: {source}")]
    Binary {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("profile {hash} is stale: only {:.1}% of its weight matches {} (at least {:.0}% needed); {} functions are gone, e.g. {}",
        100.0 * matched.share(), binary.display(), 100.0 * min, matched.unmatched.len(),
        matched.unmatched.iter().take(5).cloned().collect::<Vec<_>>().join(", "))]
    /// Too little of the profile's weight matches the binary.
    Stale {
        /// The object.
        hash: ObjectHash,
        /// The binary.
        binary: PathBuf,
        /// What matched.
        matched: Box<Matched>,
        /// The share required.
        min: f64,
    },
}

impl FetchError {
    /// The profile cannot be had or cannot be trusted, as opposed to a malformed meta file or
    /// an unreadable binary: `--on-missing warn` builds without it in these cases.
    pub fn profile_unavailable(&self) -> bool {
        match self {
            FetchError::Meta(_)
            | FetchError::Binary { .. }
            | FetchError::StoreOptionsInMeta { .. } => false,
            FetchError::Store(e) => e.is_unavailable(),
            _ => true,
        }
    }

    /// The object the error is about, for messages.
    pub fn hash(&self) -> Option<ObjectHash> {
        match self {
            FetchError::Store(StoreError::Missing { hash, .. })
            | FetchError::Store(StoreError::Corrupt { hash, .. })
            | FetchError::SizeMismatch { hash, .. }
            | FetchError::NotAProfile { hash, .. }
            | FetchError::Disagrees { hash, .. }
            | FetchError::Stale { hash, .. } => Some(*hash),
            _ => None,
        }
    }
}

/// What the build needs to know besides the order.
#[derive(Debug, Clone, Serialize)]
pub struct FetchSummary<'a> {
    /// The meta file that named the profile.
    pub meta: &'a Meta,
    /// Shares (0 to 1) of the profile's weight that match the binary: in all, by name, by code.
    pub matched_fraction: f64,
    /// Of which by name.
    pub matched_by_name_fraction: f64,
    /// Of which by code, under another name.
    pub matched_by_code_fraction: f64,
    /// Functions found under a new name: (profile name, binary name).
    pub renamed: &'a [(String, String)],
    /// How many sampled functions the binary lacks.
    pub unmatched: usize,
}

impl Fetched {
    /// What the build should be told about the fetched profile, for printing.
    pub fn summary(&self) -> FetchSummary<'_> {
        let share = |n: u64| n as f64 / self.matched.total.max(1) as f64;
        FetchSummary {
            meta: &self.meta,
            matched_fraction: self.matched.share(),
            matched_by_name_fraction: share(self.matched.by_name),
            matched_by_code_fraction: share(self.matched.by_code),
            renamed: &self.matched.renamed,
            unmatched: self.matched.unmatched.len(),
        }
    }
}

/// A relative directory in a meta file is relative to the meta file's folder, as a checkout
/// would have it; URLs and absolute paths are as they are.
fn resolve_store(store: &str, meta_path: &Path) -> String {
    if store.contains("://") || Path::new(store).is_absolute() {
        return store.to_string();
    }
    let folder = meta_path.parent().unwrap_or(Path::new(""));
    folder.join(store).display().to_string()
}

/// Reads `meta_path`, fetches and checks its profile from `store` (default: the meta file's),
/// and fits it to `binary`; refuses it if less than `min_matched` (0 to 1) of its weight matches.
///
/// Without a binary (a compiler input such as clang's cluster file, written before the compile
/// step makes one), the profile stays as it is, every function under its profile name: there
/// is nothing to match names or code against, and clang passes over the names and block ids
/// its sources lack.
pub fn fetch(
    meta_path: &Path,
    store: Option<&str>,
    binary: Option<&Binary>,
    min_matched: f64,
) -> Result<Fetched, FetchError> {
    if !meta_path.exists() {
        return Err(FetchError::NoMeta {
            path: meta_path.into(),
        });
    }
    let meta = Meta::read(meta_path)?;
    let url = match store {
        Some(s) => s.to_string(),
        // Endpoints, plain HTTP and other options come from the user, not from a reviewed file.
        None if meta.store.contains('?') => {
            return Err(FetchError::StoreOptionsInMeta {
                path: meta_path.into(),
                store: meta.store.clone(),
            })
        }
        None => resolve_store(&meta.store, meta_path),
    };
    let store = Store::open(&url)?;
    let bytes = store.get(&meta.object)?;
    let hash = meta.object;
    if bytes.len() as u64 != meta.size {
        return Err(FetchError::SizeMismatch {
            hash,
            expected: meta.size,
            actual: bytes.len() as u64,
        });
    }
    let profile =
        Graph::read(bytes.as_slice()).map_err(|source| FetchError::NotAProfile { hash, source })?;
    if let (Some(m), Some(p)) = (&meta.binary_build_id, profile.header("build-id")) {
        if m != p {
            return Err(FetchError::Disagrees {
                hash,
                meta: m.clone(),
                profile: p.to_string(),
            });
        }
    }
    let Some(binary) = binary else {
        let total = profile.total_samples();
        let matched = Matched {
            total,
            by_name: total,
            ..Matched::default()
        };
        return Ok(Fetched {
            meta,
            graph: profile,
            matched,
        });
    };
    let stale = |matched| FetchError::Stale {
        hash,
        binary: binary.path.clone(),
        matched: Box::new(matched),
        min: min_matched,
    };
    // The meta file's build-id is checked above; the binary being built is a new build.
    let fitted = fit_any_build(&profile, binary, CodePrints::Eager, min_matched);
    let Fitted { graph, matched, .. } = match fitted {
        Ok(fitted) => fitted,
        Err(FitError::TooLittleMatched { matched, .. }) => return Err(stale(*matched)),
        Err(FitError::Code { path, source }) => return Err(FetchError::Binary { path, source }),
    };
    if graph.funcs().is_empty() {
        return Err(stale(matched));
    }
    Ok(Fetched {
        meta,
        graph,
        matched,
    })
}
