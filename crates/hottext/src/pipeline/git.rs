//! Committing the meta file with the `git` the service's team already uses.
//!
//! The commit is made with plumbing (a blob, a tree from a private index, `commit-tree`) and
//! lands with one compare-and-swap of the branch (`update-ref NEW OLD`), so:
//! - the work tree and index of the repository are not touched, unless the branch is the one
//!   checked out, in which case the meta file is then replaced atomically there too;
//! - the branch moves from the commit we read to ours or not at all: a concurrent change makes
//!   the run fail without changing anything, never a lost update.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Who commits when git has no identity configured (a fresh CI machine).
const DEFAULT_AUTHOR: (&str, &str) = ("hottext pipeline", "hottext@localhost");

/// Why the pipeline's git step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// There is no `git` to run.
    #[error("git is not installed (no `git` in PATH); install it (Debian: apt-get install git)")]
    Missing,
    /// The folder is not in a git repository.
    #[error("{dir} is not in a git repository: {stderr}")]
    NotARepo {
        /// The folder.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// A git command failed.
    #[error("git {args} failed in {dir}: {stderr}")]
    Failed {
        /// The folder git ran in.
        dir: PathBuf,
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// The branch moved while the run ran.
    #[error("branch {branch} moved while the pipeline ran (someone else committed to it); nothing was changed: run again")]
    BranchMoved {
        /// The branch.
        branch: String,
    },
    /// The meta file has uncommitted changes.
    #[error("{path} has local changes in the checked-out branch {branch}; commit or discard them first, the pipeline will not overwrite them")]
    LocalChanges {
        /// The meta file.
        path: PathBuf,
        /// The checked-out branch.
        branch: String,
    },
    /// The `[repo] author` is not `Name <email>`.
    #[error("author '{0}' is not 'Name <email>'")]
    BadAuthor(String),
}

pub(crate) struct Repo {
    dir: PathBuf,
    /// `Name`, `email` to commit as, when not git's own configuration.
    author: Option<(String, String)>,
}

impl Repo {
    pub fn open(dir: &Path, author: Option<&str>) -> Result<Repo, GitError> {
        let author = match author {
            Some(a) => Some(parse_author(a)?),
            None => None,
        };
        let mut repo = Repo {
            dir: dir.to_path_buf(),
            author,
        };
        repo.git(["rev-parse", "--git-dir"]).map_err(|e| match e {
            GitError::Failed { stderr, .. } => GitError::NotARepo {
                dir: dir.into(),
                stderr,
            },
            e => e,
        })?;
        if repo.author.is_none() && repo.git(["config", "user.email"]).is_err() {
            repo.author = Some((DEFAULT_AUTHOR.0.into(), DEFAULT_AUTHOR.1.into()));
        }
        Ok(repo)
    }

    /// The directory shared by all work trees (`.git`), for the lock file.
    pub(crate) fn common_dir(&self) -> Result<PathBuf, GitError> {
        let dir = self.git(["rev-parse", "--git-common-dir"])?;
        Ok(self.dir.join(dir.trim()))
    }

    /// The commit the branch points at, if the branch exists.
    pub(crate) fn branch_tip(&self, branch: &str) -> Result<Option<String>, GitError> {
        self.resolve(&format!("refs/heads/{branch}"))
    }

    /// The commit `HEAD` points at (`None` in a repository without commits).
    pub fn head(&self) -> Result<Option<String>, GitError> {
        self.resolve("HEAD")
    }

    fn resolve(&self, rev: &str) -> Result<Option<String>, GitError> {
        match self.git([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ]) {
            Ok(id) => Ok(Some(id.trim().to_string())),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The content of `path` in `commit`, `None` if the commit has no such file.
    pub(crate) fn read_file(&self, commit: &str, path: &Path) -> Result<Option<String>, GitError> {
        let spec = format!("{commit}:{}", git_path(path));
        if self.git(["cat-file", "-e", &spec]).is_err() {
            return Ok(None);
        }
        self.git(["cat-file", "blob", &spec]).map(Some)
    }

    /// Commits `content` as `path` on top of `parent` and moves `branch` from `expected` (its
    /// tip when the run read it; `None`: the branch must not exist yet) to the new commit.
    /// Returns the new commit, or `None` when the file already had that content.
    pub(crate) fn commit_file(
        &self,
        branch: &str,
        parent: Option<&str>,
        expected: Option<&str>,
        path: &Path,
        content: &str,
        message: &str,
    ) -> Result<Option<String>, GitError> {
        let checked_out = self.checked_out_branch()? == Some(branch.to_string());
        if checked_out {
            self.check_work_tree_file(branch, parent, path)?;
        }
        let blob = self.git_input(["hash-object", "-w", "--stdin"], content)?;
        let index = tempfile::Builder::new()
            .prefix("hottext-index-")
            .tempdir()
            .map_err(|e| self.failed("(temporary index)", e.to_string()))?;
        let index_file = index.path().join("index");
        let with_index = |args: &[&str]| self.git_env(args, &[("GIT_INDEX_FILE", &index_file)]);
        if let Some(parent) = parent {
            with_index(&["read-tree", parent])?;
        }
        let cacheinfo = format!("100644,{},{}", blob.trim(), git_path(path));
        with_index(&["update-index", "--add", "--cacheinfo", &cacheinfo])?;
        let tree = with_index(&["write-tree"])?;
        let tree = tree.trim();
        if let Some(parent) = parent {
            if self
                .git(["rev-parse", &format!("{parent}^{{tree}}")])?
                .trim()
                == tree
            {
                return Ok(None);
            }
        }
        let mut args = vec!["commit-tree", tree];
        if let Some(parent) = parent {
            args.extend(["-p", parent]);
        }
        let commit = self.git_input(args, message)?;
        let commit = commit.trim().to_string();
        let old = expected.unwrap_or("0000000000000000000000000000000000000000");
        let refname = format!("refs/heads/{branch}");
        self.git([
            "update-ref",
            "-m",
            "hottext pipeline",
            &refname,
            &commit,
            old,
        ])
        .map_err(|e| match e {
            GitError::Failed { .. } => GitError::BranchMoved {
                branch: branch.into(),
            },
            e => e,
        })?;
        if checked_out {
            self.refresh_work_tree_file(path, content)?;
        }
        Ok(Some(commit))
    }

    pub fn push(&self, remote: &str, branch: &str) -> Result<(), GitError> {
        let spec = format!("refs/heads/{branch}:refs/heads/{branch}");
        self.git(["push", "--quiet", remote, &spec]).map(|_| ())
    }

    fn checked_out_branch(&self) -> Result<Option<String>, GitError> {
        match self.git(["symbolic-ref", "--quiet", "HEAD"]) {
            Ok(r) => Ok(r.trim().strip_prefix("refs/heads/").map(str::to_string)),
            Err(GitError::Failed { .. }) => Ok(None), // detached HEAD
            Err(e) => Err(e),
        }
    }

    /// In the checked-out branch, the meta file must be as committed: we replace it.
    fn check_work_tree_file(
        &self,
        branch: &str,
        parent: Option<&str>,
        path: &Path,
    ) -> Result<(), GitError> {
        let on_disk = std::fs::read_to_string(self.work_tree()?.join(path)).ok();
        let committed = match parent {
            Some(p) => self.read_file(p, path)?,
            None => None,
        };
        if on_disk != committed {
            return Err(GitError::LocalChanges {
                path: path.into(),
                branch: branch.into(),
            });
        }
        Ok(())
    }

    fn refresh_work_tree_file(&self, path: &Path, content: &str) -> Result<(), GitError> {
        let full = self.work_tree()?.join(path);
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| self.failed("(write the meta file)", e.to_string()))?;
        }
        crate::os::files::write_atomic(&full, content.as_bytes())
            .map_err(|e| self.failed("(write the meta file)", e.to_string()))?;
        self.git(["update-index", "--add", "--", &git_path(path)])
            .map(|_| ())
    }

    fn work_tree(&self) -> Result<PathBuf, GitError> {
        Ok(PathBuf::from(
            self.git(["rev-parse", "--show-toplevel"])?.trim(),
        ))
    }

    fn git<I, S>(&self, args: I) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<S> = args.into_iter().collect();
        let refs: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
        self.run(&refs, &[], None)
    }

    fn git_env(&self, args: &[&str], env: &[(&str, &Path)]) -> Result<String, GitError> {
        let refs: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        self.run(&refs, env, None)
    }

    fn git_input<I, S>(&self, args: I, input: &str) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<S> = args.into_iter().collect();
        let refs: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
        self.run(&refs, &[], Some(input))
    }

    fn run(
        &self,
        args: &[&OsStr],
        env: &[(&str, &Path)],
        input: Option<&str>,
    ) -> Result<String, GitError> {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(&self.dir).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some((name, email)) = &self.author {
            for who in ["AUTHOR", "COMMITTER"] {
                cmd.env(format!("GIT_{who}_NAME"), name);
                cmd.env(format!("GIT_{who}_EMAIL"), email);
            }
        }
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => GitError::Missing,
            _ => self.failed(&describe(args), e.to_string()),
        })?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| self.failed(&describe(args), e.to_string()))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| self.failed(&describe(args), e.to_string()))?;
        if !out.status.success() {
            return Err(self.failed(
                &describe(args),
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn failed(&self, args: &str, stderr: String) -> GitError {
        GitError::Failed {
            dir: self.dir.clone(),
            args: args.to_string(),
            stderr,
        }
    }
}

fn describe(args: &[&OsStr]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Git paths use `/` whatever the platform.
fn git_path(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn parse_author(text: &str) -> Result<(String, String), GitError> {
    let bad = || GitError::BadAuthor(text.to_string());
    let (name, rest) = text.split_once('<').ok_or_else(bad)?;
    let email = rest.strip_suffix('>').ok_or_else(bad)?;
    if name.trim().is_empty() || email.is_empty() {
        return Err(bad());
    }
    Ok((name.trim().to_string(), email.to_string()))
}

#[cfg(test)]
#[path = "git_tests.rs"]
mod tests;
