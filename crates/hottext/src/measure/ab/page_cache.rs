//! The two sides' executables, dropped from the page cache before the first run, so that
//! both come back through readahead ([`crate::os::page_cache`]: a binary written in large
//! chunks, as BOLT writes its output, otherwise runs faster for how the kernel maps it).

use std::path::PathBuf;

use crate::os::page_cache::evict;
use crate::os::shell::find_program;

/// Drops each command's executable from the page cache; says why where one could not be.
pub(super) fn level(commands: [&str; 2]) -> Vec<String> {
    let mut warnings = Vec::new();
    for command in commands {
        let Some(file) = executable(command) else {
            continue;
        };
        if let Err(e) = evict(&file) {
            warnings.push(format!(
                "could not drop {} from the page cache ({e}): if the other side's binary was \
                 written differently (BOLT's output is written in large chunks), the kernel may \
                 map the two differently and one run faster for that alone",
                file.display()
            ));
        }
    }
    warnings
}

/// The file a shell command runs: its first word that is not a variable assignment or `env` /
/// `exec`, found as `sh` finds it ([`find_program`]). `None` for a word no file answers to (a
/// shell builtin, a function, an expansion).
fn executable(command: &str) -> Option<PathBuf> {
    let word = command
        .split_whitespace()
        .find(|w| !w.contains('=') && !matches!(*w, "env" | "exec"))?
        .trim_matches(|c| c == '\'' || c == '"');
    find_program(word.as_ref()).filter(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_is_the_first_word_after_assignments_found_in_path_or_by_path() {
        let sh = executable("sh -c true").unwrap();
        assert!(sh.ends_with("sh"), "{}", sh.display());
        assert_eq!(executable("env LC_ALL=C sh -c true"), Some(sh.clone()));
        assert_eq!(executable("X=1 Y=2 'sh' -c true"), Some(sh));
        assert_eq!(
            executable("/bin/true --x"),
            Some(PathBuf::from("/bin/true"))
        );
        assert_eq!(executable("./no-such-binary --requests 10"), None);
        assert_eq!(executable("cd /tmp && true"), None);
    }

    #[test]
    fn a_command_whose_binary_is_cached_runs_it_from_readahead() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("app");
        std::fs::copy("/bin/true", &binary).unwrap();
        std::fs::read(&binary).unwrap();
        let command = format!("{} --requests 10", binary.display());
        assert!(crate::os::page_cache::resident(&binary).unwrap().0 > 0);
        assert!(level([&command, "true"]).is_empty());
        assert_eq!(crate::os::page_cache::resident(&binary).unwrap().0, 0);
    }
}
