use super::*;

fn repo() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(dir.path())
        .status()
        .expect("these tests need git: apt-get install git");
    assert!(status.success());
    std::fs::write(dir.path().join("README"), "service\n").unwrap();
    let repo = Repo::open(dir.path(), Some("Test <t@example.com>")).unwrap();
    repo.git(["add", "README"]).unwrap();
    repo.git(["commit", "-q", "-m", "base"]).unwrap();
    (dir, repo)
}

#[test]
fn commits_on_a_branch_without_touching_the_work_tree() {
    let (dir, repo) = repo();
    let base = repo.head().unwrap().unwrap();
    let meta = Path::new("hottext/svc.meta");
    let c1 = repo
        .commit_file("prof", Some(&base), None, meta, "one\n", "first")
        .unwrap()
        .unwrap();
    assert_eq!(repo.branch_tip("prof").unwrap(), Some(c1.clone()));
    assert_eq!(repo.read_file(&c1, meta).unwrap().as_deref(), Some("one\n"));
    assert!(!dir.path().join(meta).exists(), "the work tree was touched");
    // The same content again is no commit.
    assert_eq!(
        repo.commit_file("prof", Some(&c1), Some(&c1), meta, "one\n", "again")
            .unwrap(),
        None
    );
    let changed = repo.git(["diff", "--name-only", &base, &c1]).unwrap();
    assert_eq!(changed, "hottext/svc.meta\n");
}

#[test]
fn a_moved_branch_is_not_overwritten() {
    let (_dir, repo) = repo();
    let base = repo.head().unwrap().unwrap();
    let meta = Path::new("svc.meta");
    let c1 = repo
        .commit_file("prof", Some(&base), None, meta, "one\n", "first")
        .unwrap()
        .unwrap();
    // A second run that read the branch before c1 landed.
    let err = repo
        .commit_file("prof", Some(&base), None, meta, "two\n", "second")
        .unwrap_err();
    assert!(matches!(err, GitError::BranchMoved { .. }), "{err}");
    assert_eq!(repo.branch_tip("prof").unwrap(), Some(c1));
}

#[test]
fn checked_out_branch_gets_the_file_too() {
    let (dir, repo) = repo();
    let base = repo.head().unwrap().unwrap();
    let meta = Path::new("svc.meta");
    repo.commit_file("main", Some(&base), Some(&base), meta, "one\n", "m")
        .unwrap()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(meta)).unwrap(),
        "one\n"
    );
    let status = repo.git(["status", "--porcelain"]).unwrap();
    assert_eq!(status, "", "work tree should be clean");
    // A local edit is refused.
    std::fs::write(dir.path().join(meta), "edited\n").unwrap();
    let tip = repo.head().unwrap().unwrap();
    let err = repo
        .commit_file("main", Some(&tip), Some(&tip), meta, "two\n", "m")
        .unwrap_err();
    assert!(matches!(err, GitError::LocalChanges { .. }), "{err}");
}
