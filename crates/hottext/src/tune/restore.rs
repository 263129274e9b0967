//! System-wide settings that `tune` changes come back: before the first change, every file it
//! may write is recorded with its current value in a restore file; the values are written back
//! when tuning ends (also on an error or Ctrl-C, through [`Restore`]'s drop), and at the next
//! start after a crash, which left the file behind.
//!
//! The restore file tells a root process which files to write, so it is trusted only as far as
//! it must be: it is read only when owned by this user and writable by no one else, never
//! through a symbolic link, and only its lines naming files `tune` itself writes are acted on.
//! One run at a time holds the state directory's lock: a second run would take the first's
//! changed values for the originals. Runs with different state directories are kept apart by
//! the settings themselves: each run holds an exclusive `flock` on every file it may change,
//! so the second run refuses to start instead.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::os::files::write_atomic;
use crate::os::sys::selected;

/// Where the restore file lives unless told otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/hottext";
const FILE: &str = "tune-restore";
const LOCK: &str = "tune.lock";

/// The state directory, held by one run: kept until the run ends.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Creates `state_dir` if needed and takes its lock; an error of kind `WouldBlock` when
    /// another run holds it.
    pub fn take(state_dir: &Path) -> io::Result<Lock> {
        std::fs::create_dir_all(state_dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(state_dir.join(LOCK))?;
        lock_or_say(&file, || {
            format!(
                "another hottext tune is running with {} (one at a time: each puts back what it changed)",
                state_dir.display()
            )
        })?;
        Ok(Lock { _file: file })
    }
}

/// What [`Restore::recover`] did.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Settings written back.
    pub put_back: Vec<(PathBuf, String)>,
    /// Settings whose file is gone (a driver not loaded since): nothing to put back.
    pub gone: Vec<PathBuf>,
}

/// The settings to put back, and where that promise is kept on disk.
#[derive(Debug)]
pub struct Restore {
    path: PathBuf,
    saved: Vec<(PathBuf, String)>,
    /// The settings' files, locked until they are put back (they drop after `drop` ran).
    _held: Vec<File>,
}

/// Takes an exclusive `flock` on `file` without waiting; when another process holds it, an
/// error of kind `WouldBlock` that says `busy()`.
fn lock_or_say(file: &File, busy: impl FnOnce() -> String) -> io::Result<()> {
    // SAFETY: flock on a descriptor the caller owns and keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    Err(match e.kind() {
        io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::WouldBlock, busy()),
        _ => e,
    })
}

/// Takes an exclusive `flock` on each of `files` that exists; an error of kind `WouldBlock`,
/// naming the file, when another run holds one.
fn hold(files: &[&Path]) -> io::Result<Vec<File>> {
    let mut held = Vec::new();
    for &path in files {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        };
        lock_or_say(&file, || {
            format!(
                "another hottext tune is changing {} (with another --state-dir): wait for it to end, or it would take that run's value for the original",
                path.display()
            )
        })
        .map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock => e,
            kind => io::Error::new(kind, format!("lock {}: {e}", path.display())),
        })?;
        held.push(file);
    }
    Ok(held)
}

/// `always [madvise] never` → `madvise`; a plain value as it is.
pub(crate) fn current_value(text: &str) -> String {
    selected(text).unwrap_or_else(|| text.trim().to_string())
}

fn invalid(path: &Path, what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

/// The restore file's settings: `path<TAB>value` lines, each path one `may_write` accepts.
fn parse(
    path: &Path,
    text: &str,
    may_write: &dyn Fn(&Path) -> bool,
) -> io::Result<Vec<(PathBuf, String)>> {
    let mut saved = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((file, value)) = line.split_once('\t') else {
            return Err(invalid(path, format!("line {}: not PATH<TAB>VALUE", i + 1)));
        };
        if !may_write(Path::new(file)) {
            return Err(invalid(
                path,
                format!("line {}: {file} is not a setting tune changes; remove the file if you did not write it", i + 1),
            ));
        }
        saved.push((PathBuf::from(file), value.to_string()));
    }
    Ok(saved)
}

/// Reads the restore file if there is one: not through a link, and only when this user owns it
/// and no one else may write it.
fn read_trusted(path: &Path) -> io::Result<Option<String>> {
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(invalid(path, "is a symbolic link; remove it".into()))
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(invalid(
            path,
            format!(
                "not a regular file of user {me} writable only by it (owner {}, mode {:o}); remove it if you did not write it",
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(Some(text))
}

/// Writes each saved value back; a file that no longer exists is skipped and returned. The
/// first other error, if any.
fn put_back(saved: &[(PathBuf, String)]) -> io::Result<Vec<PathBuf>> {
    let (mut first, mut gone) = (Ok(()), Vec::new());
    for (path, value) in saved {
        // Never created: a setting whose file is gone stays gone.
        let written = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .and_then(|mut f| f.write_all(value.as_bytes()));
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => gone.push(path.clone()),
            Err(e) => {
                if first.is_ok() {
                    first = Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
                }
            }
        }
    }
    first.map(|()| gone)
}

impl Restore {
    /// Puts back what a crashed run left in `state_dir`'s restore file, if there is one, and
    /// says which settings those were. `may_write` names the files tune changes; a file naming
    /// others is refused whole.
    pub fn recover(
        state_dir: &Path,
        _held: &Lock,
        may_write: &dyn Fn(&Path) -> bool,
    ) -> io::Result<Recovered> {
        let path = state_dir.join(FILE);
        let Some(text) = read_trusted(&path)? else {
            return Ok(Recovered::default());
        };
        let saved = parse(&path, &text, may_write)?;
        let gone = put_back(&saved)?;
        std::fs::remove_file(&path)?;
        let put_back = saved
            .into_iter()
            .filter(|(p, _)| !gone.contains(p))
            .collect();
        Ok(Recovered { put_back, gone })
    }

    /// Locks `files` (those that exist) against other runs and records their current values in
    /// `state_dir` before any of them changes. With no files, nothing is written.
    pub(crate) fn save(state_dir: &Path, _held: &Lock, files: &[&Path]) -> io::Result<Restore> {
        let held = hold(files)?;
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
        if !saved.is_empty() {
            write_atomic(&path, text.as_bytes())?;
        }
        Ok(Restore {
            path,
            saved,
            _held: held,
        })
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
        result.map(drop)
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
        let ours = |p: &Path| p == setting;
        std::fs::write(&setting, "always [madvise] never\n").unwrap();
        let lock = Lock::take(dir.path()).unwrap();
        let restore = Restore::save(dir.path(), &lock, &[&setting]).unwrap();
        assert_eq!(restore.original(&setting), Some("madvise"));
        std::fs::write(&setting, "always").unwrap();
        std::mem::forget(restore); // as SIGKILL would
        let back = Restore::recover(dir.path(), &lock, &ours).unwrap();
        assert_eq!(back.put_back.len(), 1);
        assert_eq!(std::fs::read_to_string(&setting).unwrap(), "madvise");
        let again = Restore::recover(dir.path(), &lock, &ours).unwrap();
        assert!(again.put_back.is_empty(), "the file is gone");
    }

    #[test]
    fn a_second_run_cannot_take_the_state_directory() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Lock::take(dir.path()).unwrap();
        let second = Lock::take(dir.path()).unwrap_err();
        assert_eq!(second.kind(), io::ErrorKind::WouldBlock);
        assert!(
            second.to_string().contains("another hottext tune"),
            "{second}"
        );
    }

    #[test]
    fn a_run_with_another_state_directory_cannot_change_a_held_setting() {
        let (dir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let setting = dir.path().join("enabled");
        std::fs::write(&setting, "madvise").unwrap();
        let first_lock = Lock::take(dir.path()).unwrap();
        let first = Restore::save(dir.path(), &first_lock, &[&setting]).unwrap();
        let second_lock = Lock::take(other.path()).unwrap();
        let e = Restore::save(other.path(), &second_lock, &[&setting]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(
            e.to_string().contains("another hottext tune is changing"),
            "{e}"
        );
        assert!(!other.path().join(FILE).exists(), "nothing recorded");
        first.finish().unwrap();
        Restore::save(other.path(), &second_lock, &[&setting]).unwrap();
    }

    #[test]
    fn a_restore_file_naming_other_files_or_open_to_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let lock = Lock::take(dir.path()).unwrap();
        let target = dir.path().join("ld.so.preload");
        let file = dir.path().join(FILE);
        std::fs::write(&file, format!("{}\t/tmp/evil.so\n", target.display())).unwrap();
        let e = Restore::recover(dir.path(), &lock, &|_: &Path| false).unwrap_err();
        assert!(
            e.to_string().contains("is not a setting tune changes"),
            "{e}"
        );
        assert!(!target.exists(), "nothing written");

        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Restore::recover(dir.path(), &lock, &|_: &Path| true).unwrap_err();
        assert!(e.to_string().contains("writable only by it"), "{e}");

        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &file).unwrap();
        let e = Restore::recover(dir.path(), &lock, &|_: &Path| true).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!target.exists());
    }

    #[test]
    fn a_setting_whose_file_is_gone_does_not_block_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let lock = Lock::take(dir.path()).unwrap();
        let (kept, gone) = (dir.path().join("kept"), dir.path().join("gone"));
        std::fs::write(&kept, "always").unwrap();
        std::fs::write(
            dir.path().join(FILE),
            format!(
                "{}\tmadvise\n{}\tperformance\n",
                kept.display(),
                gone.display()
            ),
        )
        .unwrap();
        let back = Restore::recover(dir.path(), &lock, &|_: &Path| true).unwrap();
        assert_eq!(back.put_back, [(kept.clone(), "madvise".to_string())]);
        assert_eq!(back.gone, [gone]);
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "madvise");
        assert!(!dir.path().join(FILE).exists());
    }
}
