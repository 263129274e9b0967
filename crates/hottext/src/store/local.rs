//! A store in a local directory: a key is a path under it (`<dir>/sha256/<hex>`), written
//! atomically.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{Backend, RawObject, StoreError};
use crate::os::files::write_atomic;

pub(super) struct Local {
    url: String,
    root: PathBuf,
}

impl Local {
    pub(super) fn new(url: &str, dir: &str) -> Local {
        Local {
            url: url.to_string(),
            root: Path::new(dir).into(),
        }
    }

    fn io(&self, what: String) -> impl FnOnce(io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            store: self.url.clone(),
            what,
            source,
        }
    }
}

impl Backend for Local {
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.root.join(key);
        // Only a regular file is an object: a symlink to /dev/zero would be read forever.
        if let Ok(meta) = fs::metadata(&path) {
            if !meta.is_file() {
                let what = format!("read {}", path.display());
                let source = io::Error::new(io::ErrorKind::InvalidData, "not a regular file");
                return Err(self.io(what)(source));
            }
        }
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(format!("read {}", path.display()))(e)),
        }
    }

    /// Atomically: a reader sees no object or the whole one, never a part.
    fn write(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.root.join(key);
        let what = || format!("write {}", path.display());
        if let Some(folder) = path.parent() {
            fs::create_dir_all(folder).map_err(self.io(what()))?;
        }
        write_atomic(&path, bytes).map_err(self.io(what()))
    }

    fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let path = self.root.join(key);
        match fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(format!("read {}", path.display()))(e)),
        }
    }

    fn list(&self, folder: &str) -> Result<Vec<RawObject>, StoreError> {
        let mut out = Vec::new();
        self.list_into(&self.root.join(folder), "", &mut out)?;
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.root.join(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io(format!("delete {}", path.display()))(e)),
        }
    }
}

impl Local {
    /// The files under `folder` into `out`, named `prefix` + their path; symbolic links are
    /// not followed (a link could lead out of the store, or in a circle).
    fn list_into(
        &self,
        folder: &Path,
        prefix: &str,
        out: &mut Vec<RawObject>,
    ) -> Result<(), StoreError> {
        let what = || format!("list {}", folder.display());
        let entries = match fs::read_dir(folder) {
            Ok(entries) => entries,
            // A store nobody has written to yet is empty.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io(what())(e)),
        };
        for entry in entries {
            let entry = entry.map_err(self.io(what()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // Names are hashes and upload entries: a hidden file is a temporary a crash left.
            if name.starts_with('.') {
                continue;
            }
            // DirEntry's metadata does not follow symbolic links.
            let meta = entry.metadata().map_err(self.io(what()))?;
            let named = format!("{prefix}{name}");
            if meta.is_dir() {
                self.list_into(&entry.path(), &format!("{named}/"), out)?;
            } else if meta.is_file() {
                out.push(RawObject {
                    name: named,
                    size: meta.len(),
                    modified: meta.modified().ok(),
                });
            }
        }
        Ok(())
    }
}
