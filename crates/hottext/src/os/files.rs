//! Files replaced atomically: a reader sees the old file or the whole new one, never a part,
//! even if the machine stops half-way. Meta files, store objects, linker inputs and unit files
//! are all written this way.

use std::io::{self, Write};
use std::path::Path;

/// What the temporary files start with: hidden, and recognisably ours if a crash leaves one.
pub const TEMP_PREFIX: &str = ".hottext-tmp-";

/// Temporary file beside `path`, fsync, rename over `path`, fsync the directory (the rename is
/// durable only then). `path` must be a regular file or a link, or not exist: renaming over
/// `/dev/null` or a FIFO would replace the device itself (as root, `-o /dev/null` would).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let kind = meta.file_type();
        if !kind.is_file() && !kind.is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is not a regular file (a device, FIFO or directory); give a file path",
                    path.display()
                ),
            ));
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f"]);
    }

    #[test]
    fn a_device_or_directory_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomic(dir.path(), b"x").unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(dir.path().is_dir());
        let err = write_atomic(Path::new("/dev/null"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(!Path::new("/dev/null").is_file(), "/dev/null was replaced");
    }
}
