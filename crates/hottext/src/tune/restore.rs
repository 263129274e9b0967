//! System-wide settings that `tune` changes come back: before the first change, every file it
//! may write is recorded with its current value in a restore file; the values are written back
//! when tuning ends (also on an error or Ctrl-C, through [`Restore`]'s drop), and at the next
//! start after a crash, which left the file behind.

use std::io;
use std::path::{Path, PathBuf};

use crate::os::files::write_atomic;

/// Where the restore file lives unless told otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/hottext";
const FILE: &str = "tune-restore";

/// The settings to put back, and where that promise is kept on disk.
#[derive(Debug)]
pub struct Restore {
    path: PathBuf,
    saved: Vec<(PathBuf, String)>,
}

/// `always [madvise] never` → `madvise`; a plain value as it is.
pub fn current_value(text: &str) -> String {
    match (text.find('['), text.find(']')) {
        (Some(s), Some(e)) if s < e => text[s + 1..e].to_string(),
        _ => text.trim().to_string(),
    }
}

fn parse(text: &str) -> Vec<(PathBuf, String)> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(path, value)| (PathBuf::from(path), value.to_string()))
        .collect()
}

/// Writes each saved value back; the first error, if any.
fn put_back(saved: &[(PathBuf, String)]) -> io::Result<()> {
    let mut first = Ok(());
    for (path, value) in saved {
        if let Err(e) = std::fs::write(path, value) {
            if first.is_ok() {
                first = Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
            }
        }
    }
    first
}

impl Restore {
    /// Puts back what a crashed run left in `state_dir`'s restore file, if there is one, and
    /// says which settings those were.
    pub fn recover(state_dir: &Path) -> io::Result<Vec<(PathBuf, String)>> {
        let path = state_dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e),
        };
        let saved = parse(&text);
        put_back(&saved)?;
        std::fs::remove_file(&path)?;
        Ok(saved)
    }

    /// Records the current values of `files` (those that exist) in `state_dir` before any of
    /// them changes.
    pub fn save(state_dir: &Path, files: &[&Path]) -> io::Result<Restore> {
        std::fs::create_dir_all(state_dir)?;
        let mut saved = Vec::new();
        for &file in files {
            if let Ok(text) = std::fs::read_to_string(file) {
                saved.push((file.to_path_buf(), current_value(&text)));
            }
        }
        let text: String = saved
            .iter()
            .map(|(p, v)| format!("{}\t{v}\n", p.display()))
            .collect();
        let path = state_dir.join(FILE);
        write_atomic(&path, text.as_bytes())?;
        Ok(Restore { path, saved })
    }

    /// The value `file` had when tuning started.
    pub fn original(&self, file: &Path) -> Option<&str> {
        self.saved
            .iter()
            .find(|(p, _)| p == file)
            .map(|(_, v)| v.as_str())
    }

    /// Puts everything back and removes the restore file.
    pub fn finish(mut self) -> io::Result<()> {
        let result = put_back(&self.saved);
        if result.is_ok() {
            let _ = std::fs::remove_file(&self.path);
        }
        self.saved.clear();
        result
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if !self.saved.is_empty() && put_back(&self.saved).is_ok() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashed_run_is_put_back_at_the_next_start() {
        let dir = tempfile::tempdir().unwrap();
        let setting = dir.path().join("enabled");
        std::fs::write(&setting, "always [madvise] never\n").unwrap();
        let restore = Restore::save(dir.path(), &[&setting]).unwrap();
        assert_eq!(restore.original(&setting), Some("madvise"));
        std::fs::write(&setting, "always").unwrap();
        std::mem::forget(restore); // as SIGKILL would
        let back = Restore::recover(dir.path()).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(std::fs::read_to_string(&setting).unwrap(), "madvise");
        assert!(
            Restore::recover(dir.path()).unwrap().is_empty(),
            "the file is gone"
        );
    }
}
