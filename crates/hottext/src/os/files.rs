//! Files replaced atomically: a reader sees the old file or the whole new one, never a part,
//! even if the machine stops half-way. Meta files, store objects, linker inputs and unit files
//! are all written this way.

use std::io::{self, Write};
use std::path::Path;

/// What the temporary files start with: hidden, and recognisably ours if a crash leaves one.
pub const TEMP_PREFIX: &str = ".hottext-tmp-";

/// Temporary file beside `path`, fsync, rename over `path`, fsync the directory (the rename is
/// durable only then).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
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
}
