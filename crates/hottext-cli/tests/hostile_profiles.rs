//! Profiles come from stores and other hosts: crafted names must never reach a linker input,
//! nor crafted figures crash a verb. Regression tests for the hostile review's findings
//! (issue 11), each named after one.

mod common;

use common::{hottext, program_and_profile, run, stderr, write};

const PROGRAM: &str = r#"
#include <stdio.h>
__attribute__((noinline)) int hot1(int x) { return x + 1; }
__attribute__((noinline)) int hot2(int x) { return x * 3; }
int main(void) {
    long s = 0;
    for (int i = 0; i < 1000; i++) s += hot1(i) + hot2(i);
    printf("%ld\n", s);
    return 0;
}
"#;

fn setup(profile: &str) -> tempfile::TempDir {
    program_and_profile(PROGRAM, profile)
}

const HEAD: &str = "# hottext profile v1\nfn main 64 10\nfn hot1 16 50\nfn hot2 16 40\n";

/// The review's payloads: a symbol defined through the script, a file pulled into the link,
/// and the program's text discarded.
const PAYLOADS: [&str; 3] = [
    r#"alias main x)}"hot1"=hot2,".text.q":{*(y"#,
    r#"alias main INCLUDE"/etc/hostname""#,
    r#"alias hot1 "/DISCARD/":{*(.text*)}"#,
];

#[test]
fn linker_script_injection_through_an_alias_is_refused_with_its_line() {
    for payload in PAYLOADS {
        let dir = setup(&format!("{HEAD}{payload}\n"));
        for format in ["ld-script", "gold-order", "lld-order"] {
            for binary in [&["--binary", "base"][..], &[][..]] {
                let mut args = vec!["order", "p.profile", "--format", format, "-o", "out.txt"];
                args.extend_from_slice(binary);
                let o = hottext(&args, dir.path());
                // With the binary the alias is dropped (the binary has no such symbol); without
                // it the name is refused. Either way nothing crafted is written.
                let written =
                    std::fs::read_to_string(dir.path().join("out.txt")).unwrap_or_default();
                assert!(
                    !written.contains("DISCARD")
                        && !written.contains("INCLUDE")
                        && !written.contains("=hot2"),
                    "{payload} reached {format}: {written}"
                );
                if binary.is_empty() {
                    assert_eq!(
                        o.status.code(),
                        Some(2),
                        "{payload} {format}: {}",
                        stderr(&o)
                    );
                    assert!(stderr(&o).contains("p.profile, line 5"), "{}", stderr(&o));
                    assert!(
                        stderr(&o).contains("cannot be written safely"),
                        "{}",
                        stderr(&o)
                    );
                } else {
                    assert!(o.status.success(), "{payload} {format}: {}", stderr(&o));
                }
            }
        }
    }
}

#[test]
fn an_alias_the_binary_lacks_never_reaches_the_linker() {
    // A safe-looking alias that would pull another function's section into the range.
    let dir = setup(&format!("{HEAD}alias hot1 printf\n"));
    let o = hottext(
        &[
            "order",
            "p.profile",
            "--binary",
            "base",
            "--format",
            "ld-script",
            "-o",
            "hot.ld",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let script = std::fs::read_to_string(dir.path().join("hot.ld")).unwrap();
    assert!(script.contains(".text.hot1"), "{script}");
    assert!(!script.contains("printf"), "{script}");
    // The script links, and the program still computes what it did.
    run("gcc", &["p.o", "-Wl,-T,hot.ld", "-o", "out"], dir.path());
    assert_eq!(
        run("./out", &[], dir.path()).stdout,
        run("./base", &[], dir.path()).stdout
    );
}

#[test]
fn huge_sizes_in_a_profile_neither_loop_nor_wrap() {
    // A terabyte function once made `order` walk 2^28 pages and 3.3 GB: now the layout figures
    // take no time whatever the sizes. Sizes no function can have are refused with their line;
    // two near-2^64 sizes once wrapped `sampled_bytes` to 9.
    let dir = tempfile::tempdir().unwrap();
    let big = "# hottext profile v2\nfn a 4294967296 5\nfn b 4294967296 5\nfn c 10 5\n\
               call a b 3\nsite a b 4294967000 3\ncall b c 2\n";
    write(dir.path(), "big.profile", big);
    let started = std::time::Instant::now();
    let o = hottext(
        &["order", "big.profile", "--json", "-o", "order.txt"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["ordered"]["sampled_bytes"], 2 * 4294967296u64 + 10);

    write(
        dir.path(),
        "wrap.profile",
        "# hottext profile v1\nfn c 10 5\nfn b 18446744073709551615 5\n",
    );
    let o = hottext(&["order", "wrap.profile", "-o", "order.txt"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("line 3"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("18446744073709551615"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn huge_durations_are_refused_with_the_option_named() {
    // Each once panicked (exit 101) converting to a Duration.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    for (args, option) in [
        (
            &["record", "--duration", "1e30", "-o", "x.data", "--", "true"][..],
            "--duration",
        ),
        (
            &["store", "gc", "--store", "store", "--min-age-days", "1e300"][..],
            "--min-age-days",
        ),
    ] {
        let o = hottext(args, dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(option), "{}", stderr(&o));
    }
}

#[test]
fn a_binary_that_is_no_regular_file_is_refused_not_read_forever() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.profile", HEAD);
    let o = hottext(&["order", "p.profile", "--binary", "/dev/zero"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
}

#[test]
fn a_store_object_that_is_a_symlink_to_a_device_is_refused_not_read_forever() {
    let dir = setup(HEAD);
    let put = hottext(
        &[
            "store",
            "put",
            "p.profile",
            "--store",
            "st",
            "--meta",
            "p.meta",
        ],
        dir.path(),
    );
    assert!(put.status.success(), "{}", stderr(&put));
    let objects: Vec<_> = walk(&dir.path().join("st"));
    assert_eq!(objects.len(), 1, "{objects:?}");
    std::fs::remove_file(&objects[0]).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &objects[0]).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hottext"))
        .args([
            "fetch",
            "--meta",
            "p.meta",
            "--binary",
            "base",
            "--format",
            "ld-script",
        ])
        .args(["-o", "hot.ld"])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("fetch still reading /dev/zero after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        status.code(),
        Some(1),
        "the profile is unusable: exit 1 (--on-missing fail)"
    );
}

/// Every regular file or symlink under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_meta_file_cannot_send_the_builds_credentials_to_its_own_endpoint() {
    // The review's meta file pointed fetch at a listener of its own over plain HTTP; fetch
    // sent it signed requests with the session token.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = setup(HEAD);
    let meta = format!(
        "# hottext profile meta v1\n\
         object: sha256:{}\n\
         store: s3://bucket/p?endpoint=http://127.0.0.1:{port}&allow_http=true\n\
         size: 10\nformat: hottext profile v1\nsamples: 1\n\
         window-start: 2026-01-01T00:00:00Z\nwindow-end: 2026-01-01T00:00:00Z\n",
        "0".repeat(64)
    );
    write(dir.path(), "evil.meta", &meta);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_hottext"))
        .args([
            "fetch",
            "--meta",
            "evil.meta",
            "--binary",
            "base",
            "-o",
            "hot.ld",
        ])
        .args(["--on-missing", "warn"])
        .current_dir(dir.path())
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_SESSION_TOKEN", "token")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--store"), "{}", stderr(&o));
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "fetch connected to the meta file's endpoint"
    );
}

#[test]
fn repeated_call_line_is_refused() {
    // Found by the profile fuzz target: two `call a b` lines, each with a site, were read as
    // two calls and written back with both sites under each, which no reader accepted.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "twice.profile",
        "# hottext profile v2\nfn a 100 5\nfn b 10 5\n\
         call a b 3\nsite a b 40 3\ncall a b 3\nsite a b 40 3\n",
    );
    let o = hottext(&["order", "twice.profile", "-o", "order.txt"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("'call a b' is on two lines"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("order.txt").exists());
}
