//! Shell words: how hottext writes a command so that `sh` reads back the same words, for the
//! commands it prints, the shell lines it runs and the cron lines it installs.

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
