//! One pipeline run at a time per repository: an exclusive `flock` on a file in the git
//! directory. The kernel drops the lock when the process exits, however it exits, so a run that
//! crashed never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a waiting run tries the lock again.
const RETRY: Duration = Duration::from_millis(100);

/// The run's scratch directory (perf.data), beside the lock and named after it. A run that was
/// killed leaves it behind; the next run, holding the same lock, clears it first. Removed when
/// dropped.
#[derive(Debug)]
pub(crate) struct Scratch(pub PathBuf);

impl Scratch {
    /// The scratch directory of the run that holds `lock`, empty.
    pub fn create(lock: &Lock) -> io::Result<Scratch> {
        let path = lock.path.with_extension("scratch");
        match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::create_dir(&path)?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Held until dropped.
#[derive(Debug)]
pub struct Lock {
    _file: File,
    /// The lock file.
    pub path: PathBuf,
}

/// Why the pipeline's lock cannot be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock file cannot be opened.
    #[error("cannot open the lock file {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The lock is held by another run for longer than the wait.
    #[error("another pipeline run ({holder}) has held {path} for longer than {waited:?}; try again later")]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// What the lock file says holds it.
        holder: String,
        /// How long this run waited.
        waited: Duration,
    },
}

impl Lock {
    /// Takes the lock, waiting up to `wait` for a run that holds it.
    pub(crate) fn acquire(path: &Path, wait: Duration) -> Result<Lock, LockError> {
        let io_err = |source| LockError::Io {
            path: path.into(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err)?;
        let started = Instant::now();
        loop {
            // SAFETY: flock on a descriptor we own; no memory is involved.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                break;
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io_err(err));
            }
            if started.elapsed() >= wait {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(LockError::Busy {
                    path: path.into(),
                    holder: holder.trim().to_string(),
                    waited: wait,
                });
            }
            std::thread::sleep(RETRY);
        }
        // Say who holds it, for the message of a run that gives up waiting.
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = write!(file, "pid {}", std::process::id());
        let _ = file.flush();
        Ok(Lock {
            _file: file,
            path: path.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_waits_then_gives_up_naming_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = Lock::acquire(&path, Duration::ZERO).unwrap();
        // flock locks belong to the open file, so a second open in this process conflicts.
        let err = Lock::acquire(&path, Duration::from_millis(250)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(first);
        // Another test's thread may fork between our open and its exec: the child then shares
        // the lock's open file until it execs (the descriptor is close-on-exec), so allow it
        // that moment instead of insisting on none.
        Lock::acquire(&path, Duration::from_secs(10)).unwrap();
    }
}
