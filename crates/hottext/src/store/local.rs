//! A store in a local directory: `<dir>/sha256/<hex>`, written atomically.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{Backend, RawObject, StoreError, OBJECTS};

/// Temporary files of writes in progress start with this, so listings skip them.
const TEMP_PREFIX: &str = ".tmp-";

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

    /// Temporary file in the same directory, fsync, rename: a reader sees the old object, no
    /// object, or the whole new one; never a part.
    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.objects.join(name);
        let what = || format!("write {}", path.display());
        fs::create_dir_all(&self.objects).map_err(self.io(what()))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(&self.objects)
            .map_err(self.io(what()))?;
        tmp.write_all(bytes).map_err(self.io(what()))?;
        tmp.as_file().sync_all().map_err(self.io(what()))?;
        tmp.persist(&path).map_err(|e| self.io(what())(e.error))?;
        // The rename is durable once the directory is synced.
        fs::File::open(&self.objects)
            .and_then(|d| d.sync_all())
            .map_err(self.io(what()))
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
            if name.starts_with(TEMP_PREFIX) {
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
