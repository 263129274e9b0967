//! The profile store: profiles kept outside the service's repository, named by the SHA-256 of
//! their content, as in section 4 of "Hot-text and huge pages" (a file handle and a checksum).
//!
//! The repository holds only a small [`meta`] file that names the object; the build fetches the
//! object by that name and [`Store::get`] checks the bytes against it, so a corrupted or swapped
//! object can never reach the linker.
//!
//! Where objects live is a URL:
//!
//! | URL | backend |
//! | --- | --- |
//! | `/var/lib/hottext/store`, `file:///var/lib/hottext/store` | a local directory (writes are atomic: temporary file, fsync, rename) |
//! | `s3://bucket/prefix?endpoint=http://host:9000&region=us-east-1&allow_http=true` | S3 and S3-compatible servers |
//! | `gs://bucket/prefix` | Google Cloud Storage |
//! | `az://container/prefix` | Azure Blob Storage |
//! | `https://host/prefix` | HTTP/WebDAV |
//!
//! The remote backends are the `object_store` crate's; their credentials come from the usual
//! environment variables (`AWS_ACCESS_KEY_ID`, `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_...`) and
//! never from the URL, which is written into the meta file. Query parameters are the client's
//! configuration keys.
//!
//! Objects are stored under `<prefix>/sha256/<64 hex digits>` in every backend, so a local store
//! can be copied into a bucket as it is.
//!
//! ```
//! use hottext::store::Store;
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path().to_str().unwrap())?;
//! let put = store.put(b"# hottext profile v1\nfn main 10 1\n")?;
//! assert_eq!(store.get(&put.hash)?, b"# hottext profile v1\nfn main 10 1\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod hash;
mod local;
pub mod meta;
#[cfg(feature = "remote")]
mod remote;
pub(crate) mod uploads;

use std::collections::HashSet;
use std::io;
use std::time::{Duration, SystemTime};

use serde::Serialize;

pub use hash::{BadHash, ObjectHash};

/// The folder of objects under a store's root; the algorithm is part of the key so that a later
/// change of hash can live beside the old objects.
const OBJECTS: &str = "sha256";

/// One raw object as a backend lists it.
#[derive(Debug, Clone)]
struct RawObject {
    /// The key relative to the folder listed (`/`-separated).
    name: String,
    size: u64,
    modified: Option<SystemTime>,
}

/// What each backend does; [`Store`] adds hashing and verification on top, so every backend
/// behaves the same. A key is a path under the store's root, `/`-separated, made by the store
/// itself from checked parts (`sha256/<hex>`, `uploads/<service>/<entry>`).
trait Backend {
    /// The bytes under `key`, or `None` if there is nothing there.
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Writes `key` whole or not at all.
    fn write(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
    fn size(&self, key: &str) -> Result<Option<u64>, StoreError>;
    /// Everything under `folder`, at any depth, named by its key relative to `folder`.
    fn list(&self, folder: &str) -> Result<Vec<RawObject>, StoreError>;
    fn delete(&self, key: &str) -> Result<(), StoreError>;
}

/// The key of the object `hash`.
fn object_key(hash: &ObjectHash) -> String {
    format!("{OBJECTS}/{}", hash.hex())
}

/// Where a store is, without how to reach it: the URL before its options (`?endpoint=…`,
/// `allow_http`, region). Meta files record only this, since the options decide where the
/// user's credentials are sent and belong to the user's configuration or command line.
pub fn location(url: &str) -> &str {
    let base = url.split('?').next().unwrap_or(url);
    // `s3://b/p/` and `s3://b/p` are one store.
    match base.trim_end_matches('/') {
        "" => base,
        trimmed => trimmed,
    }
}

/// An opened store.
pub struct Store {
    url: String,
    backend: Box<dyn Backend>,
}

/// Why a store operation failed; every message names the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's URL names no backend this build has, or is malformed.
    #[error("store URL '{url}': {msg}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        msg: String,
    },
    /// No object has this hash.
    #[error("store {store} has no object {hash}")]
    Missing {
        /// The hash asked for.
        hash: ObjectHash,
        /// The store's URL.
        store: String,
    },
    /// The object's bytes do not hash to its name.
    #[error("store object {hash} in {store} is corrupt: its content hashes to {actual}; put the profile again (a put replaces a damaged object) or re-run the pipeline")]
    Corrupt {
        /// The object's name.
        hash: ObjectHash,
        /// The hash of the bytes read.
        actual: ObjectHash,
        /// The store's URL.
        store: String,
    },
    /// A file operation of a directory store failed.
    #[error("store {store}: cannot {what}: {source}")]
    Io {
        /// The store's URL.
        store: String,
        /// The operation, as a verb phrase (`delete PATH`).
        what: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// A request to a remote store failed.
    #[error("store {store}: cannot {what}: {source}")]
    Remote {
        /// The store's URL.
        store: String,
        /// The operation, as a verb phrase.
        what: String,
        /// The client's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// The object could not be had (missing, corrupt, or the store unreachable), as opposed to
    /// a mistake in how the store was named. `fetch --on-missing warn` builds on in these cases.
    pub fn is_unavailable(&self) -> bool {
        !matches!(self, StoreError::BadUrl { .. })
    }
}

/// What [`Store::put`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Put {
    /// The object's name: the SHA-256 of its bytes.
    #[serde(serialize_with = "display")]
    pub hash: ObjectHash,
    /// Bytes of the object.
    pub size: u64,
    /// The object was there already (same hash, intact), so nothing was written.
    pub existed: bool,
}

/// One object in [`Store::list`].
#[derive(Debug, Clone, Serialize)]
pub struct Object {
    /// The object's name.
    #[serde(serialize_with = "display")]
    pub hash: ObjectHash,
    /// Bytes of the object.
    pub size: u64,
    /// Seconds since the Unix epoch, when the backend knows.
    pub modified: Option<u64>,
}

/// What [`Store::gc`] removed (or would remove, on a dry run) and kept.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GcReport {
    /// The objects removed (or that would be).
    pub deleted: Vec<Object>,
    /// Objects kept because the meta file refers to them.
    pub kept_referenced: usize,
    /// Unreferenced, but younger than the minimum age: perhaps a run that has not committed yet.
    pub kept_young: usize,
    /// Nothing was deleted: `deleted` is what would have been.
    pub dry_run: bool,
}

impl Store {
    /// Opens the store at `url` (a directory path or a URL, see the module docs). Nothing is
    /// contacted yet.
    pub fn open(url: &str) -> Result<Store, StoreError> {
        let backend: Box<dyn Backend> = match url.split_once("://") {
            None => Box::new(local::Local::new(url, url)),
            Some(("file", path)) => Box::new(local::Local::new(url, path)),
            #[cfg(feature = "remote")]
            Some((scheme, rest)) => Box::new(remote::Remote::open(url, scheme, rest)?),
            #[cfg(not(feature = "remote"))]
            Some((scheme, _)) => {
                return Err(StoreError::BadUrl {
                    url: url.to_string(),
                    msg: format!("this hottext was built without remote stores (cargo feature `remote`), so {scheme}:// cannot be reached; give a directory or a file:// URL, or rebuild with the feature"),
                })
            }
        };
        Ok(Store {
            url: url.to_string(),
            backend,
        })
    }

    /// The URL or directory the store was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stores `bytes` under their hash; an object there under that name with other content (a
    /// corrupted one) is replaced. Putting what is already there writes it again: that makes
    /// it young, so that [`Store::gc`]'s minimum age counts from this put, and a meta file
    /// naming it that is not committed yet does not lose it to a gc.
    pub fn put(&self, bytes: &[u8]) -> Result<Put, StoreError> {
        let hash = ObjectHash::of(bytes);
        let size = bytes.len() as u64;
        let existed = match self.backend.read(&object_key(&hash))? {
            Some(old) => ObjectHash::of(&old) == hash,
            None => false,
        };
        self.backend.write(&object_key(&hash), bytes)?;
        Ok(Put {
            hash,
            size,
            existed,
        })
    }

    /// The object's bytes, checked against its name.
    pub fn get(&self, hash: &ObjectHash) -> Result<Vec<u8>, StoreError> {
        let bytes = self
            .backend
            .read(&object_key(hash))?
            .ok_or_else(|| StoreError::Missing {
                hash: *hash,
                store: self.url.clone(),
            })?;
        let actual = ObjectHash::of(&bytes);
        if actual != *hash {
            return Err(StoreError::Corrupt {
                hash: *hash,
                actual,
                store: self.url.clone(),
            });
        }
        Ok(bytes)
    }

    /// Whether the store has an object of that name (without reading or checking it).
    pub fn contains(&self, hash: &ObjectHash) -> Result<bool, StoreError> {
        Ok(self.backend.size(&object_key(hash))?.is_some())
    }

    /// Every object, sorted by hash. Files that are not named like objects are left out.
    pub fn list(&self) -> Result<Vec<Object>, StoreError> {
        let mut objects: Vec<Object> = self
            .backend
            .list(OBJECTS)?
            .into_iter()
            .filter_map(|raw| {
                Some(Object {
                    hash: raw.name.parse().ok()?,
                    size: raw.size,
                    modified: raw
                        .modified
                        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                        .map(|d| d.as_secs()),
                })
            })
            .collect();
        objects.sort_by_key(|o| o.hash);
        Ok(objects)
    }

    /// Removes the object; removing one that is not there is not an error.
    pub fn delete(&self, hash: &ObjectHash) -> Result<(), StoreError> {
        self.backend.delete(&object_key(hash))
    }

    /// Deletes the objects not in `keep` that are older than `min_age` at `now`. Objects whose
    /// age the backend does not know are kept.
    pub fn gc(
        &self,
        keep: &HashSet<ObjectHash>,
        min_age: Duration,
        now: SystemTime,
        dry_run: bool,
    ) -> Result<GcReport, StoreError> {
        let mut report = GcReport {
            dry_run,
            ..GcReport::default()
        };
        let now_secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        for object in self.list()? {
            if keep.contains(&object.hash) {
                report.kept_referenced += 1;
                continue;
            }
            let old_enough = object
                .modified
                .is_some_and(|m| now_secs.saturating_sub(m) >= min_age.as_secs());
            if !old_enough {
                report.kept_young += 1;
                continue;
            }
            if !dry_run {
                self.delete(&object.hash)?;
            }
            report.deleted.push(object);
        }
        Ok(report)
    }
}

fn display<S: serde::Serializer>(h: &ObjectHash, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(h)
}

#[cfg(test)]
mod tests;
