//! Helpers of the store, fetch and pipeline tests: a real S3-compatible server (s3proxy, run
//! with java), small programs to profile, throwaway git repositories.

#![allow(dead_code)] // each test file uses a different subset

pub mod pipeline;
pub mod published;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The s3proxy release the tests run; `.ci/run` puts it in the local Maven repository.
pub const S3PROXY_VERSION: &str = "2.6.0";
/// Credentials of the test server (it listens on 127.0.0.1 only).
pub const S3_IDENTITY: &str = "hottext-test";
pub const S3_CREDENTIAL: &str = "hottext-test-secret";
pub const S3_BUCKET: &str = "profiles";

/// Fails the test, naming the tool, when `program` cannot run.
pub fn need(program: &str, version_arg: &str) {
    let ok = Command::new(program)
        .arg(version_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs `{program}`; `bash .ci/run` installs it (Debian package: {})",
        match program {
            "java" => "openjdk-17-jre-headless",
            "perf" => "linux-perf",
            other => other,
        }
    );
}

fn s3proxy_jar() -> PathBuf {
    if let Some(p) = std::env::var_os("HOTTEXT_S3PROXY_JAR") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map_or(PathBuf::from("/root"), PathBuf::from);
    home.join(format!(
        ".m2/repository/org/gaul/s3proxy/{v}/s3proxy-{v}-jar-with-dependencies.jar",
        v = S3PROXY_VERSION
    ))
}

/// A running s3proxy with a filesystem backend; killed on drop (also when the test panics).
pub struct S3Proxy {
    child: Child,
    pub port: u16,
    /// jclouds' filesystem backend: `<basedir>/<bucket>/<key>` is the object's content.
    pub basedir: PathBuf,
    _dir: tempfile::TempDir,
}

impl S3Proxy {
    pub fn start() -> S3Proxy {
        need("java", "-version");
        let jar = s3proxy_jar();
        assert!(
            jar.exists(),
            "this test needs the s3proxy jar at {} (mvn -q dependency:get \
             -Dartifact=org.gaul:s3proxy:{S3PROXY_VERSION}:jar:jar-with-dependencies; `bash .ci/run` does it)",
            jar.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let basedir = dir.path().join("blobs");
        std::fs::create_dir_all(basedir.join(S3_BUCKET)).unwrap();
        let port = free_port();
        let props = dir.path().join("s3proxy.conf");
        std::fs::write(
            &props,
            format!(
                "s3proxy.endpoint=http://127.0.0.1:{port}\n\
                 s3proxy.authorization=aws-v2-or-v4\n\
                 s3proxy.identity={S3_IDENTITY}\n\
                 s3proxy.credential={S3_CREDENTIAL}\n\
                 jclouds.provider=filesystem\n\
                 jclouds.filesystem.basedir={}\n",
                basedir.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("s3proxy.log")).unwrap();
        let child = Command::new("java")
            .arg("-jar")
            .arg(&jar)
            .arg("--properties")
            .arg(&props)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("cannot start java");
        let mut proxy = S3Proxy {
            child,
            port,
            basedir,
            _dir: dir,
        };
        proxy.wait_ready();
        proxy
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(self._dir.path().join("s3proxy.log"))
                    .unwrap_or_default();
                panic!("s3proxy exited ({status}) before it was ready:\n{log}");
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "s3proxy did not listen on 127.0.0.1:{} within 90 s",
            self.port
        );
    }

    /// The store URL of a prefix in the test bucket.
    pub fn url(&self, prefix: &str) -> String {
        format!(
            "s3://{S3_BUCKET}/{prefix}?endpoint=http://127.0.0.1:{}&allow_http=true&region=us-east-1",
            self.port
        )
    }

    /// The environment the client needs (credentials never go in the URL).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), S3_IDENTITY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), S3_CREDENTIAL.into()),
        ]
    }
}

impl Drop for S3Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Runs `hottext` with extra environment variables.
pub fn hottext_env(args: &[&str], dir: &Path, env: &[(String, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hottext"))
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("cannot run the hottext binary")
}

/// Runs git in `dir` with a fixed identity; panics with git's stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("this test needs git (apt-get install git)");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A throwaway repository with one commit of `files`.
pub fn repo_with(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "the service"]);
}

/// A small service: a loop over a few dozen functions until SIGTERM (or `argv[1]` rounds; a
/// stride in `argv[2]` changes the mix of requests),
/// built with function sections and frame pointers so perf sees its callers.
pub const SERVICE_C: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef HANDLER_A
#define HANDLER_A handler_a
#endif
#ifndef HANDLER_B
#define HANDLER_B handler_b
#endif
static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }
#define LEAF(n) __attribute__((noinline)) unsigned long leaf##n(unsigned long x) { \
    for (int i = 0; i < 50 + n; i++) x = x * 6364136223846793005UL + n; return x; }
LEAF(0) LEAF(1) LEAF(2) LEAF(3) LEAF(4) LEAF(5) LEAF(6) LEAF(7) LEAF(8) LEAF(9)
LEAF(10) LEAF(11) LEAF(12) LEAF(13) LEAF(14) LEAF(15) LEAF(16) LEAF(17) LEAF(18) LEAF(19)
#ifdef EXTRA /* a function added in the next version: everything after it moves */
__attribute__((noinline)) unsigned long added(unsigned long x) { for (int i = 0; i < 99; i++) x = x * 31 + (x >> 3); return x; }
#endif
__attribute__((noinline)) unsigned long HANDLER_A(unsigned long x) { return leaf0(x) ^ leaf1(x) ^ leaf2(x) ^ leaf3(x); }
__attribute__((noinline)) unsigned long HANDLER_B(unsigned long x) { return leaf4(x) + leaf5(x) + leaf6(x); }
__attribute__((noinline)) unsigned long handler_c(unsigned long x) { return leaf7(x) - leaf8(x) + leaf9(x); }
__attribute__((noinline)) unsigned long cold_path(unsigned long x) { return leaf10(x) + leaf11(x) + leaf12(x) + leaf13(x) + leaf14(x) + leaf15(x) + leaf16(x) + leaf17(x) + leaf18(x) + leaf19(x); }
__attribute__((noinline)) unsigned long serve(unsigned long i) {
    switch (i % 8) { case 0: case 1: case 2: return HANDLER_A(i); case 3: case 4: return HANDLER_B(i);
    case 5: case 6: return handler_c(i); default: return i > 1000000000000UL ? cold_path(i) : leaf0(i); }
}
int main(int argc, char **argv) {
    signal(SIGTERM, on_term);
    unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 0, sum = 0;
    /* argv[2], a stride, changes the mix of requests: 2 serves only even ones. */
    unsigned long stride = argc > 2 ? strtoul(argv[2], 0, 10) : 1;
    for (unsigned long i = 0; !stop && (rounds == 0 || i < rounds); i++) sum += serve(i * stride);
    printf("%lu\n", sum);
    return 0;
}
"#;

/// Compiles [`SERVICE_C`] into `dir/name.o` and links `dir/name`, with the given `-D`
/// definitions (to rename the handlers: `-DHANDLER_A=handle_alpha`).
pub fn build_service(dir: &Path, name: &str, defines: &[&str]) -> PathBuf {
    let src = dir.join("service.c");
    std::fs::write(&src, SERVICE_C).unwrap();
    let obj = dir.join(format!("{name}.o"));
    let out = dir.join(name);
    let mut args = vec![
        "-O1",
        "-fno-omit-frame-pointer",
        "-mno-omit-leaf-frame-pointer",
        "-ffunction-sections",
        "-fno-inline",
        "-c",
    ];
    args.extend_from_slice(defines);
    let run = |cmd: &mut Command| {
        let status = cmd.status().expect("this test needs gcc");
        assert!(status.success(), "gcc failed: {cmd:?}");
    };
    run(Command::new("gcc")
        .args(&args)
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    run(Command::new("gcc").arg(&obj).arg("-o").arg(&out));
    out
}
