//! Issue 34: every file a verb writes is replaced atomically, never through or over a symbolic
//! link, never over one of the verb's inputs; a full disk leaves the old file as it was.

mod common;

use std::path::Path;
use std::process::Command;

use common::{hottext, program_and_profile, run, stderr, write};

const PROGRAM: &str = "int hot(int x) { return x * 3; }\nint main(void) { return hot(1) - 3; }\n";
const PROFILE: &str = "# hottext profile v2\nfn hot 16 90\nfn main 32 10\ncall main hot 80\n";

/// Names of the files in `dir` that a write left behind.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".hottext-tmp-"))
        .collect()
}

fn refused(o: &std::process::Output, says: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    assert!(stderr(o).contains(says), "{}", stderr(o));
}

#[test]
fn an_output_that_is_a_symbolic_link_is_refused_and_its_target_kept() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.profile", PROFILE);
    let target = write(dir.path(), "target.ld", "precious\n");
    std::os::unix::fs::symlink("target.ld", dir.path().join("link.ld")).unwrap();
    for extra in [&["--format", "ld-script"][..], &["--format", "list"]] {
        let mut args = vec!["order", "p.profile", "-o", "link.ld"];
        args.extend(extra);
        let o = hottext(&args, dir.path());
        refused(&o, "link.ld is a symbolic link (to target.ld)");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    assert!(dir.path().join("link.ld").is_symlink());
    let o = hottext(&["merge", "p.profile", "-o", "link.ld"], dir.path());
    refused(&o, "is a symbolic link");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.profile", PROFILE);
    write(dir.path(), "b.profile", PROFILE);
    std::fs::hard_link(
        dir.path().join("a.profile"),
        dir.path().join("hard.profile"),
    )
    .unwrap();
    std::os::unix::fs::symlink("a.profile", dir.path().join("soft.profile")).unwrap();
    for out in ["a.profile", "hard.profile", "soft.profile"] {
        let o = hottext(&["order", "a.profile", "-o", out], dir.path());
        refused(
            &o,
            &format!("-o {out} is the same file as the input a.profile"),
        );
        let o = hottext(&["merge", "b.profile", "a.profile", "-o", out], dir.path());
        refused(
            &o,
            &format!("-o {out} is the same file as the input a.profile"),
        );
    }
    let o = hottext(
        &["order", "a.profile", "-o", "m.o", "--markers", "m.o"],
        dir.path(),
    );
    refused(&o, "-o m.o and --markers m.o are the same file");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.profile")).unwrap(),
        PROFILE
    );

    // `profile p.data -o p.data`: refused before the recording is read.
    let data = write(dir.path(), "p.data", "a recording\n");
    let o = hottext(
        &["profile", "p.data", "--binary", "/bin/true", "-o", "p.data"],
        dir.path(),
    );
    refused(&o, "-o p.data is the same file as the input p.data");
    assert_eq!(std::fs::read_to_string(&data).unwrap(), "a recording\n");
    assert!(leftovers(dir.path()).is_empty());
}

/// A tmpfs of 64 KiB, unmounted when the test is done with it.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount() -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("this test needs `mount`");
        assert!(
            o.status.success(),
            "this test needs root, to mount a 64 KiB tmpfs (a full disk): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_keeps_the_old_linker_script_whole() {
    // 3 000 functions with long names: an ld script of about 600 KB, ten times the disk.
    let mut profile = String::from("# hottext profile v2\n");
    for i in 0..3000 {
        profile.push_str(&format!(
            "fn function_with_a_rather_long_name_{i:05} 64 {}\n",
            i + 1
        ));
    }
    let work = tempfile::tempdir().unwrap();
    write(work.path(), "big.profile", &profile);
    let disk = SmallDisk::mount();
    let script = write(disk.0.path(), "hot.ld", "/* the working script */\n");
    let o = hottext(
        &[
            "order",
            "big.profile",
            "--format",
            "ld-script",
            "-o",
            script.to_str().unwrap(),
        ],
        work.path(),
    );
    refused(&o, "No space left on device");
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "/* the working script */\n",
        "the old script was damaged"
    );
    assert!(
        leftovers(disk.0.path()).is_empty(),
        "{:?}",
        leftovers(disk.0.path())
    );
    // The same small profile fits: the script is replaced whole.
    write(work.path(), "p.profile", PROFILE);
    let o = hottext(
        &[
            "order",
            "p.profile",
            "--format",
            "ld-script",
            "-o",
            script.to_str().unwrap(),
        ],
        work.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&script)
        .unwrap()
        .contains("__hot_start"));
}

#[test]
fn a_profile_path_cannot_inject_commands_into_the_linker_script() {
    let dir = program_and_profile(PROGRAM, PROFILE);
    // Directories `q*` and `ASSERT(0, "injected") `, then the file `*x.profile`.
    let crafted = "q*/ASSERT(0, \"injected\") /*x.profile";
    let path = dir.path().join(crafted);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::rename(dir.path().join("p.profile"), &path).unwrap();
    let o = hottext(
        &["order", crafted, "--format", "ld-script", "-o", "hot.ld"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // GNU ld runs the script: an ASSERT that escaped the comment would fail the link.
    run(
        "gcc",
        &["-fuse-ld=bfd", "p.o", "-Wl,-T,hot.ld", "-o", "linked"],
        dir.path(),
    );
}
