//! `hottext store` through the real binary: one suite, run against a local directory and
//! against a real S3-compatible server (s3proxy, started by the test on 127.0.0.1).

mod common;
mod support;

use std::path::PathBuf;

use common::{stderr, stdout, write};
use hottext::store::ObjectHash;
use support::{hottext_env, S3Proxy};

const PROFILE_A: &str = "# hottext profile v1\nfn main 64 10\nfn work 32 90\ncall main work 90\n";
const PROFILE_B: &str = "# hottext profile v1\nfn main 64 50\nfn idle 16 5\ncall main idle 5\n";

/// One backend under test: its URL, its environment, and how to damage an object behind the
/// store's back.
struct Backend<'a> {
    url: String,
    env: Vec<(String, String)>,
    raw_object: Box<dyn Fn(&ObjectHash) -> PathBuf + 'a>,
}

/// The suite: each step names itself in its assertion messages.
fn store_suite(backend: &Backend) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "a.profile", PROFILE_A);
    write(d, "b.profile", PROFILE_B);
    let a = ObjectHash::of(PROFILE_A.as_bytes());
    let b = ObjectHash::of(PROFILE_B.as_bytes());
    let ht = |args: &[&str]| hottext_env(args, d, &backend.env);
    let url = backend.url.as_str();

    // put: the name is the SHA-256 of the content.
    let put = ht(&["store", "put", "a.profile", "--store", url]);
    assert!(put.status.success(), "put: {}", stderr(&put));
    assert_eq!(stdout(&put).trim(), a.to_string(), "put prints the hash");
    assert!(stderr(&put).contains("stored"), "put: {}", stderr(&put));
    let again = ht(&["store", "put", "a.profile", "--store", url]);
    assert!(
        stderr(&again).contains("already there"),
        "second put: {}",
        stderr(&again)
    );

    // get: the same bytes back.
    let get = ht(&[
        "store",
        "get",
        &a.to_string(),
        "--store",
        url,
        "-o",
        "a.out",
    ]);
    assert!(get.status.success(), "get: {}", stderr(&get));
    assert_eq!(std::fs::read_to_string(d.join("a.out")).unwrap(), PROFILE_A);

    // ls: exactly what was put, with its size.
    let put_b = ht(&["store", "put", "b.profile", "--store", url, "--json"]);
    assert!(put_b.status.success(), "put b: {}", stderr(&put_b));
    let ls = ht(&["store", "ls", "--store", url, "--json"]);
    assert!(ls.status.success(), "ls: {}", stderr(&ls));
    let listed: serde_json::Value = serde_json::from_str(&stdout(&ls)).unwrap();
    let mut expected = [
        (a.to_string(), PROFILE_A.len()),
        (b.to_string(), PROFILE_B.len()),
    ];
    expected.sort();
    assert_eq!(listed["schema"], 2, "{listed}");
    let got: Vec<(String, usize)> = listed["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["hash"].as_str().unwrap().to_string(),
                o["size"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert_eq!(got, expected, "ls");

    // A missing object: status 1, the message names the hash.
    let missing = ObjectHash::of(b"never stored");
    let get = ht(&["store", "get", &missing.to_string(), "--store", url]);
    assert_eq!(get.status.code(), Some(1), "get missing: {}", stderr(&get));
    assert!(
        stderr(&get).contains(&missing.to_string()),
        "get missing: {}",
        stderr(&get)
    );

    // A corrupted object is caught on read and repaired by a put.
    let raw = (backend.raw_object)(&a);
    assert!(
        raw.exists(),
        "the backend keeps the object at {}",
        raw.display()
    );
    std::fs::write(&raw, "# hottext profile v1\nfn evil 1 1\n").unwrap();
    let get = ht(&["store", "get", &a.to_string(), "--store", url]);
    assert_eq!(get.status.code(), Some(1), "get corrupt: {}", stderr(&get));
    let err = stderr(&get);
    assert!(
        err.contains("corrupt") && err.contains(&a.to_string()),
        "get corrupt: {err}"
    );
    assert!(stdout(&get).is_empty(), "corrupt bytes must not be printed");
    let repair = ht(&["store", "put", "a.profile", "--store", url]);
    assert!(
        stderr(&repair).contains("stored"),
        "repair: {}",
        stderr(&repair)
    );
    let get = ht(&["store", "get", &a.to_string(), "--store", url]);
    assert_eq!(stdout(&get), PROFILE_A, "after repair");

    // gc: a dry run deletes nothing; then only the unreferenced object goes.
    let gc = |extra: &[&str]| {
        let mut args = vec!["store", "gc", "--store", url, "--min-age-days", "0"];
        args.extend_from_slice(extra);
        ht(&args)
    };
    let keep = a.to_string();
    let dry = gc(&["--keep", &keep, "--dry-run"]);
    assert!(
        stdout(&dry).contains(&format!("would delete {b}")),
        "gc dry: {}",
        stdout(&dry)
    );
    assert_eq!(
        list(&ht(&["store", "ls", "--store", url])).len(),
        2,
        "dry run deleted"
    );
    let young = ht(&["store", "gc", "--store", url, "--keep", &keep]);
    assert!(
        stdout(&young).is_empty(),
        "gc deleted a young object: {}",
        stdout(&young)
    );
    let real = gc(&["--keep", &keep]);
    assert!(real.status.success(), "gc: {}", stderr(&real));
    assert_eq!(
        list(&ht(&["store", "ls", "--store", url])),
        [a.to_string()],
        "after gc"
    );

    // Bad input is a usage error (status 2).
    let bad = ht(&["store", "get", "sha256:xyz", "--store", url]);
    assert_eq!(bad.status.code(), Some(2), "bad hash: {}", stderr(&bad));
    let not_profile = write(d, "junk.txt", "hello");
    let junk = ht(&[
        "store",
        "put",
        not_profile.to_str().unwrap(),
        "--store",
        url,
    ]);
    assert_eq!(
        junk.status.code(),
        Some(2),
        "non-profile put: {}",
        stderr(&junk)
    );
}

fn list(out: &std::process::Output) -> Vec<String> {
    assert!(out.status.success(), "ls: {}", stderr(out));
    stdout(out)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn local_directory_store_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let objects = root.join("sha256");
    store_suite(&Backend {
        url: root.display().to_string(),
        env: vec![],
        raw_object: Box::new(|h: &ObjectHash| objects.join(h.hex())),
    });
}

#[test]
fn s3_store_passes_the_suite_against_a_real_server() {
    let proxy = S3Proxy::start();
    let prefix = "team/server";
    let objects = proxy
        .basedir
        .join(support::S3_BUCKET)
        .join(prefix)
        .join("sha256");
    store_suite(&Backend {
        url: proxy.url(prefix),
        env: proxy.env(),
        raw_object: Box::new(|h: &ObjectHash| objects.join(h.hex())),
    });
}

#[test]
fn s3_without_credentials_fails_and_credentials_in_the_url_are_refused() {
    let proxy = S3Proxy::start();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.profile", PROFILE_A);
    let wrong = vec![
        ("AWS_ACCESS_KEY_ID".to_string(), "nobody".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "wrong".to_string()),
    ];
    let url = proxy.url("p");
    let out = hottext_env(
        &["store", "put", "a.profile", "--store", &url],
        dir.path(),
        &wrong,
    );
    assert!(
        !out.status.success(),
        "a put with wrong credentials succeeded"
    );
    assert!(stderr(&out).contains(&url), "{}", stderr(&out));

    let leaky = format!("{url}&secret_access_key=oops");
    let out = hottext_env(
        &["store", "ls", "--store", &leaky],
        dir.path(),
        &proxy.env(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("credential"), "{}", stderr(&out));
}

#[test]
fn local_put_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.profile", PROFILE_A);
    let store = dir.path().join("store");
    let out = hottext_env(
        &[
            "store",
            "put",
            "a.profile",
            "--store",
            store.to_str().unwrap(),
        ],
        dir.path(),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let names: Vec<String> = std::fs::read_dir(store.join("sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [ObjectHash::of(PROFILE_A.as_bytes()).hex()]);
}

#[test]
fn gc_keeps_every_object_the_meta_file_history_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let repo = d.join("repo");
    support::repo_with(&repo, &[("README", "svc\n")]);
    let store = d.join("store");
    let url = store.to_str().unwrap();
    let mut hashes = Vec::new();
    for (i, text) in [
        PROFILE_A,
        PROFILE_B,
        "# hottext profile v1\nfn unused 1 1\n",
    ]
    .iter()
    .enumerate()
    {
        let name = format!("p{i}.profile");
        write(d, &name, text);
        let meta = repo.join("svc.meta");
        let out = hottext_env(
            &[
                "store",
                "put",
                &name,
                "--store",
                url,
                "--meta",
                meta.to_str().unwrap(),
            ],
            d,
            &[],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        hashes.push(ObjectHash::of(text.as_bytes()));
        if i < 2 {
            // The first two profiles were committed, one after the other.
            support::git(&repo, &["add", "svc.meta"]);
            support::git(&repo, &["commit", "-q", "-m", &format!("profile {i}")]);
        }
    }
    support::git(&repo, &["checkout", "-q", "--", "svc.meta"]);
    // gc by the history of repo/svc.meta, with `extra` options.
    let gc_by_history = |extra: &[&str]| {
        let mut args = vec!["store", "gc", "--store", url, "--repo", "repo"];
        args.extend_from_slice(&["--meta", "svc.meta", "--min-age-days", "0"]);
        args.extend_from_slice(extra);
        hottext_env(&args, d, &[])
    };
    let gc = gc_by_history(&[]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert_eq!(stdout(&gc).trim(), format!("deleted {}", hashes[2]));
    let mut kept = vec![hashes[0].to_string(), hashes[1].to_string()];
    kept.sort();
    assert_eq!(
        list(&hottext_env(&["store", "ls", "--store", url], d, &[])),
        kept
    );

    // A version of the meta file that cannot be read stops gc, dry run or not: what it names
    // would look unreferenced. Nothing is deleted.
    let p3 = "# hottext profile v1\nfn later 1 1\n";
    write(d, "p3.profile", p3);
    let put = hottext_env(&["store", "put", "p3.profile", "--store", url], d, &[]);
    assert!(put.status.success(), "{}", stderr(&put));
    let p3 = ObjectHash::of(p3.as_bytes());
    write(
        &repo,
        "svc.meta",
        &format!("hottext-meta v1\nobject: {p3}\nsize: damaged\n"),
    );
    support::git(&repo, &["commit", "-q", "-am", "a damaged meta file"]);
    for extra in [&["--dry-run"][..], &[]] {
        let dry = !extra.is_empty();
        let gc = gc_by_history(extra);
        assert_eq!(gc.status.code(), Some(2), "dry run {dry}: {}", stderr(&gc));
        assert!(stderr(&gc).contains("cannot be read"), "{}", stderr(&gc));
        assert_eq!(
            list(&hottext_env(&["store", "ls", "--store", url], d, &[])).len(),
            3,
            "gc deleted something"
        );
    }
    // As its message advises: with the object that version names kept, gc goes on.
    assert!(stderr(&gc_by_history(&[])).contains("--keep sha256:HEX"));
    let gc = gc_by_history(&["--keep", &p3.to_string()]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert!(stderr(&gc).contains("kept by --keep"), "{}", stderr(&gc));
    assert_eq!(
        list(&hottext_env(&["store", "ls", "--store", url], d, &[])).len(),
        3
    );
}
