//! The command line that runs this same binary again, for hints a user
//! copies from the terminal. After `cargo run` there is no `raftlock` on
//! the PATH, so a hint saying `raftlock status` would not run.

use std::path::Path;

/// `exe` (the running binary) spelled as a shell command word: plain
/// `raftlock` when that name on the PATH is this very binary, else its
/// full path, quoted if the shell would split or expand it.
pub fn command_word(exe: &Path) -> String {
    if on_path_as_raftlock(exe) {
        return "raftlock".to_string();
    }
    shell_quote(&exe.display().to_string())
}

/// True when running `raftlock` from a shell would start `exe`.
fn on_path_as_raftlock(exe: &Path) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    let Ok(exe) = exe.canonicalize() else {
        return false;
    };
    // The shell takes the first match, so only the first one counts.
    std::env::split_paths(&path)
        .map(|dir| dir.join("raftlock"))
        .find(|candidate| candidate.is_file())
        .and_then(|first| first.canonicalize().ok())
        .is_some_and(|first| first == exe)
}

/// `word` unchanged when it has nothing a POSIX shell treats specially,
/// else in single quotes.
fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_a_shell_would_split() {
        assert_eq!(
            shell_quote("/opt/raftlock/target/debug/raftlock"),
            "/opt/raftlock/target/debug/raftlock"
        );
        assert_eq!(shell_quote("/my dir/raftlock"), "'/my dir/raftlock'");
        assert_eq!(shell_quote("/it's/raftlock"), r"'/it'\''s/raftlock'");
    }
}
