//! A store in a local directory: `<dir>/sha256/<hex>`, written atomically.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{Backend, RawObject, StoreError, OBJECTS};
use crate::os::files::write_atomic;

pub(super) struct Local {
    url: String,
    objects: PathBuf,
}

impl Local {
    pub(super) fn new(url: &str, dir: &str) -> Local {
        Local {
            url: url.to_string(),
            objects: Path::new(dir).join(OBJECTS),
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
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.objects.join(name);
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
    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.objects.join(name);
        let what = || format!("write {}", path.display());
        fs::create_dir_all(&self.objects).map_err(self.io(what()))?;
        write_atomic(&path, bytes).map_err(self.io(what()))
    }

    fn size(&self, name: &str) -> Result<Option<u64>, StoreError> {
        let path = self.objects.join(name);
        match fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(format!("read {}", path.display()))(e)),
        }
    }

    fn list(&self) -> Result<Vec<RawObject>, StoreError> {
        let what = || format!("list {}", self.objects.display());
        let entries = match fs::read_dir(&self.objects) {
            Ok(entries) => entries,
            // A store nobody has written to yet is empty.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(self.io(what())(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(self.io(what()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // Object names are hashes: a hidden file is a temporary a crash left behind.
            if name.starts_with('.') {
                continue;
            }
            let meta = entry.metadata().map_err(self.io(what()))?;
            if !meta.is_file() {
                continue;
            }
            out.push(RawObject {
                name,
                size: meta.len(),
                modified: meta.modified().ok(),
            });
        }
        Ok(out)
    }

    fn delete(&self, name: &str) -> Result<(), StoreError> {
        let path = self.objects.join(name);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io(format!("delete {}", path.display()))(e)),
        }
    }
}
