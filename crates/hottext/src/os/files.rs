//! Files replaced atomically: a reader sees the old file or the whole new one, never a part,
//! even if the machine stops half-way or the disk fills. Every file hottext writes is written
//! this way: profiles, linker inputs, markers, meta files, store objects, unit files, reports.
//!
//! A symbolic link is never written through nor replaced: following it would write wherever
//! it points (another user's file, an input), and replacing it would silently cut the link a
//! user made on purpose; either is a surprise, so the write is refused and says which.

use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What the temporary files start with: hidden, and recognisably ours if a crash leaves one.
pub(crate) const TEMP_PREFIX: &str = ".hottext-tmp-";

/// Temporary file beside `path`, fsync, rename over `path`, fsync the directory (the rename is
/// durable only then). On any failure (a full disk) the old file stays as it was and the
/// temporary file is removed. `path` must be a regular file or not exist: renaming over
/// `/dev/null` or a FIFO would replace the device itself (as root, `-o /dev/null` would), and
/// a symbolic link is refused (see the module's comment).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(path).unwrap_or_default();
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symbolic link (to {}); hottext neither writes through a link nor replaces one: give the target's path, or remove the link",
                    path.display(),
                    target.display()
                ),
            ));
        }
        if !kind.is_file() {
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

/// Whether `a` and `b` are one file (the same device and inode), also when one is a link to the
/// other or a hard link of it; false when either does not exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
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

    #[test]
    fn a_symbolic_link_is_neither_followed_nor_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        let link = dir.path().join("link");
        std::fs::write(&target, "kept").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_atomic(&link, b"new").unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
        assert!(link.is_symlink());
    }

    #[test]
    fn same_file_sees_through_links_and_hard_links() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let hard = dir.path().join("hard");
        std::fs::hard_link(&file, &hard).unwrap();
        let soft = dir.path().join("soft");
        std::os::unix::fs::symlink(&file, &soft).unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "x").unwrap();
        assert!(same_file(&file, &hard));
        assert!(same_file(&soft, &file));
        assert!(!same_file(&file, &other));
        assert!(!same_file(&file, &dir.path().join("missing")));
    }
}
