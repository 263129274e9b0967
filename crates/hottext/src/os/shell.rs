//! Shell words: how hottext writes a command so that `sh` reads back the same words, for the
//! commands it prints, the shell lines it runs and the cron lines it installs; and which file
//! `sh` runs for a command name.

/// `s` as one word for `sh`: as it is when it holds only characters no shell treats specially,
/// else in single quotes, inside which nothing is special (a `'` is closed, escaped and
/// reopened). `$(…)`, backquotes, globs and spaces in a path stay text.
pub fn word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,+@%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `words` as one shell line that `sh -c` splits back into the same words.
pub fn join<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    words.into_iter().map(word).collect::<Vec<_>>().join(" ")
}

/// The file `sh` runs for the command name `name`: a name with a `/` is a path as it is; any
/// other is looked up in each directory of `PATH` in turn, the first regular file found.
pub fn find_program(name: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    let name = std::path::Path::new(name);
    if name.as_os_str().as_encoded_bytes().contains(&b'/') {
        return Some(name.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// What `sh` makes of `line`: its words, one a line.
    fn sh_words(line: &str) -> String {
        let out = Command::new("sh")
            .args(["-c", &format!("printf '%s\\n' {line}")])
            .output()
            .expect("sh runs");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn a_program_is_found_as_the_shell_finds_it() {
        let sh = find_program("sh".as_ref()).unwrap();
        assert!(sh.is_file() && sh.ends_with("sh"), "{}", sh.display());
        assert_eq!(
            find_program("./no-such-program".as_ref()),
            Some("./no-such-program".into())
        );
        assert_eq!(find_program("no-such-program-anywhere".as_ref()), None);
    }

    #[test]
    fn plain_words_stay_as_they_are() {
        assert_eq!(word("/usr/bin/perf"), "/usr/bin/perf");
        assert_eq!(word("--cpu=0-3,5"), "--cpu=0-3,5");
        assert_eq!(word(""), "''");
    }

    #[test]
    fn sh_reads_back_the_same_words_whatever_they_hold() {
        let hostile = [
            "a b",
            "$(touch pwned)",
            "`id`",
            "it's",
            "\"q\"",
            "*",
            "a\\b",
            "100%",
            "semi;colon",
            "new\nline",
        ];
        let dir = tempfile::tempdir().unwrap();
        let line = join(hostile);
        let out = Command::new("sh")
            .current_dir(dir.path())
            .args(["-c", &format!("printf '%s\\0' {line}")])
            .output()
            .unwrap();
        let back: Vec<&str> = std::str::from_utf8(&out.stdout)
            .unwrap()
            .split_terminator('\0')
            .collect();
        assert_eq!(back, hostile);
        assert!(!dir.path().join("pwned").exists(), "a word ran a command");
        assert_eq!(sh_words(&join(["x", "y z"])), "x\ny z\n");
    }
}
