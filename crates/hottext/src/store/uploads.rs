//! A fleet's uploads: each host's scheduled run (`pipeline run --upload-only`) puts its profile
//! in the store as an object, then an entry that names it, with the host and the recording's
//! time, under `uploads/<service>/<entry>`. One merge job (`pipeline run --merge-uploads`) reads
//! the recent entries of a service and merges their profiles.
//!
//! Nothing is lost when uploads race: the object is named by its content, and an entry's name
//! holds the end of the recording, the host and the object, so two uploads never write the same
//! key unless they are the same upload. The entry is written after its object, so an entry
//! always names an object that is there (unless gc removed it since: gc keeps what entries name).
//!
//! An entry is a meta file (the same lines, see [`super::meta`]) with two more:
//!
//! ```text
//! host: web-17
//! service: server
//! ```

use std::collections::HashSet;
use std::path::Path;
use std::time::SystemTime;

use super::meta::{Meta, MetaError};
use super::{ObjectHash, Store, StoreError};

/// The folder of the entries under a store's root.
const UPLOADS: &str = "uploads";

/// One host's upload: where its profile is and what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub service: String,
    pub host: String,
    pub meta: Meta,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UploadError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("upload entry {key}: {msg}")]
    Malformed { key: String, msg: String },
}

/// Checks a service or host name that becomes part of a key in the store (a file name, a URL
/// path): 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || name.starts_with('.') || !name.chars().all(allowed) {
        return Err(format!(
            "{what} '{}' cannot name an upload: use 1 to 64 of A-Z a-z 0-9 . _ - (not starting with a dot)",
            name.escape_debug()
        ));
    }
    Ok(())
}

impl Upload {
    /// The entry's key: `uploads/<service>/<window end>-<host>-<object>`. Sorting the names of
    /// one service sorts its uploads by time.
    pub fn key(&self) -> String {
        let end = super::meta::time(self.meta.window_end).replace([':', '-'], "");
        format!(
            "{UPLOADS}/{}/{end}-{}-{}",
            self.service,
            self.host,
            self.meta.object.hex()
        )
    }

    pub(crate) fn to_text(&self) -> String {
        format!(
            "{}host: {}\nservice: {}\n",
            self.meta.to_text("hottext pipeline run --upload-only"),
            self.host,
            self.service
        )
    }

    /// Reads an entry stored under `key`.
    pub fn parse(text: &str, key: &str) -> Result<Upload, UploadError> {
        let malformed = |msg: String| UploadError::Malformed {
            key: key.to_string(),
            msg,
        };
        let meta =
            Meta::parse(text, Path::new(key)).map_err(|e: MetaError| malformed(e.to_string()))?;
        let field = |name: &str| -> Result<String, UploadError> {
            let prefix = format!("{name}: ");
            let value = text
                .lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .ok_or_else(|| malformed(format!("no '{name}:' line")))?;
            check_name(name, value).map_err(malformed)?;
            Ok(value.to_string())
        };
        Ok(Upload {
            host: field("host")?,
            service: field("service")?,
            meta,
        })
    }
}

impl Store {
    /// Records `upload` (whose object must be stored already) under its own key; returns the
    /// key.
    pub(crate) fn announce(&self, upload: &Upload) -> Result<String, UploadError> {
        for (what, name) in [("service", &upload.service), ("host", &upload.host)] {
            check_name(what, name).map_err(|msg| UploadError::Malformed {
                key: format!("{UPLOADS}/{}", upload.service.escape_debug()),
                msg,
            })?;
        }
        let key = upload.key();
        self.backend.write(&key, upload.to_text().as_bytes())?;
        Ok(key)
    }

    /// Removes `upload`'s entry (not its object, which gc removes once nothing names it).
    pub(crate) fn withdraw(&self, upload: &Upload) -> Result<(), UploadError> {
        Ok(self.backend.delete(&upload.key())?)
    }

    /// The objects that the entries of every service name: `store gc` keeps them. An entry that
    /// cannot be read is an error, since the object it names would look unreferenced.
    pub fn uploaded_objects(&self) -> Result<HashSet<ObjectHash>, UploadError> {
        let mut named = HashSet::new();
        for raw in self.backend.list(UPLOADS)? {
            let key = format!("{UPLOADS}/{}", raw.name);
            if let Some(bytes) = self.backend.read(&key)? {
                let text = String::from_utf8_lossy(&bytes);
                named.insert(Upload::parse(&text, &key)?.meta.object);
            }
        }
        Ok(named)
    }

    /// The entries of `service` that end at or after `since`, oldest first; each entry that
    /// cannot be read is an `Err` in its place (the merge job reports it and goes on).
    pub fn uploads(
        &self,
        service: &str,
        since: SystemTime,
    ) -> Result<Vec<Result<Upload, UploadError>>, UploadError> {
        check_name("service", service).map_err(|msg| UploadError::Malformed {
            key: format!("{UPLOADS}/{}", service.escape_debug()),
            msg,
        })?;
        let folder = format!("{UPLOADS}/{service}");
        let mut names: Vec<String> = self
            .backend
            .list(&folder)?
            .into_iter()
            .map(|raw| raw.name)
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            let key = format!("{folder}/{name}");
            let read = match self.backend.read(&key)? {
                Some(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => Upload::parse(&text, &key),
                    Err(_) => Err(UploadError::Malformed {
                        key: key.clone(),
                        msg: "not UTF-8 text".into(),
                    }),
                },
                // Deleted between listing and reading: not there.
                None => continue,
            };
            if read.as_ref().is_ok_and(|u| u.meta.window_end < since) {
                continue;
            }
            out.push(read);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn upload(store: &Store, host: &str, profile: &str, end_secs: u64) -> Upload {
        let put = store.put(profile.as_bytes()).unwrap();
        Upload {
            service: "svc".into(),
            host: host.into(),
            meta: Meta {
                object: put.hash,
                store: "test".into(),
                size: put.size,
                format: "hottext profile v1".into(),
                samples: 10,
                window_start: SystemTime::UNIX_EPOCH + Duration::from_secs(end_secs - 60),
                window_end: SystemTime::UNIX_EPOCH + Duration::from_secs(end_secs),
                binary_build_id: None,
                binary_version: "1".into(),
            },
        }
    }

    #[test]
    fn entries_read_back_oldest_first_and_old_ones_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        let late = upload(
            &store,
            "b",
            "# hottext profile v1\nfn f 1 1\n",
            2_000_000_000,
        );
        let early = upload(
            &store,
            "a",
            "# hottext profile v1\nfn g 1 1\n",
            1_900_000_000,
        );
        let ancient = upload(
            &store,
            "c",
            "# hottext profile v1\nfn h 1 1\n",
            1_000_000_000,
        );
        for u in [&late, &early, &ancient] {
            store.announce(u).unwrap();
        }
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
        let read: Vec<Upload> = store
            .uploads("svc", since)
            .unwrap()
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(read, [early, late]);
        // The objects are not entries, and an entry is not an object.
        assert_eq!(store.list().unwrap().len(), 3);
        let named = store.uploaded_objects().unwrap();
        assert_eq!(named.len(), 3);
        assert!(named.contains(&ancient.meta.object));
        store.withdraw(&ancient).unwrap();
        assert_eq!(store.uploaded_objects().unwrap().len(), 2);
    }

    #[test]
    fn names_that_would_leave_their_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        for bad in ["../x", "a/b", "", ".hidden", "a b", "ä"] {
            let mut u = upload(&store, "ok", "# hottext profile v1\nfn f 1 1\n", 1_000);
            u.host = bad.into();
            assert!(store.announce(&u).is_err(), "host {bad:?} was taken");
            assert!(store.uploads(bad, SystemTime::UNIX_EPOCH).is_err());
        }
        let text = upload(&store, "ok", "# hottext profile v1\nfn f 1 1\n", 1_000)
            .to_text()
            .replace("host: ok", "host: ../../etc");
        assert!(Upload::parse(&text, "k").is_err());
    }
}
