//! Man pages and shell completions, written from the clap definitions so
//! they cannot drift from the CLI: `raftlock completions SHELL` prints a
//! completion script (the convention of kubectl, rustup, gh), and the
//! hidden `raftlock manpages DIR` writes `raftlock.1` and one page per
//! subcommand, nested ones included (`raftlock-snapshot-save.1`). The
//! Debian package runs both at build time (scripts/build-deb.sh); nothing
//! generated is committed.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Command};
use clap_complete::Shell;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for. bash: save as
    /// /usr/share/bash-completion/completions/raftlock; zsh: as `_raftlock`
    /// in a directory of $fpath; fish: as
    /// ~/.config/fish/completions/raftlock.fish.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Args)]
pub struct ManpagesArgs {
    /// Directory to write the pages into (created if missing).
    pub dir: PathBuf,
}

/// Prints `shell`'s completion script for `command` to stdout.
pub fn completions(mut command: Command, args: CompletionsArgs) {
    clap_complete::generate(args.shell, &mut command, "raftlock", &mut std::io::stdout());
}

/// Writes one page per visible command into `args.dir`; prints each
/// file's path.
pub fn manpages(command: Command, args: ManpagesArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    for path in write_pages(command, &args.dir)? {
        println!("{}", path.display());
    }
    Ok(())
}

/// The pages of `command` and its visible subcommands, recursively, as
/// `raftlock.1`, `raftlock-lock.1`, `raftlock-snapshot-save.1`.
pub fn write_pages(command: Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut command = command;
    // Fills in the derived parts (`help` subcommands, version flags), so
    // each page shows what `--help` shows.
    command.build();
    let mut written = Vec::new();
    write_page(&command, command.get_name().to_string(), dir, &mut written)?;
    Ok(written)
}

fn write_page(
    command: &Command,
    page: String,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let mut text = Vec::new();
    // The page's title is its file's name (`raftlock-lock(1)`), as git's
    // and cargo's subcommand pages are.
    // clap names are `&'static str` (without its `string` feature): the
    // few dozen names of a one-shot generator are leaked, not freed.
    let name: &'static str = Box::leak(page.clone().into_boxed_str());
    let titled = command.clone().name(name);
    clap_mangen::Man::new(titled)
        .render(&mut text)
        .with_context(|| format!("cannot render the page of {page}"))?;
    let path = dir.join(format!("{page}.1"));
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    for sub in visible_subcommands(command) {
        write_page(sub, format!("{page}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}

/// Subcommands an operator sees in `--help`: neither hidden ones nor
/// clap's generated `help`.
pub fn visible_subcommands(command: &Command) -> impl Iterator<Item = &Command> {
    command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every visible command path, as `["lock"]`, `["snapshot", "save"]`.
    fn command_paths(command: &Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
        for sub in visible_subcommands(command) {
            let mut path = prefix.to_vec();
            path.push(sub.get_name().to_string());
            out.push(path.clone());
            command_paths(sub, &path, out);
        }
    }

    fn all_paths() -> Vec<Vec<String>> {
        let mut command = crate::Cli::command();
        command.build();
        let mut out = Vec::new();
        command_paths(&command, &[], &mut out);
        out
    }

    /// Nothing is committed, so "current with the CLI" means: the
    /// generator covers every subcommand there is. A subcommand added to
    /// `Command` gets its page, titled and describing its own arguments.
    #[test]
    fn every_subcommand_has_a_man_page() {
        let dir = tempfile::tempdir().expect("temp dir");
        let written = write_pages(crate::Cli::command(), dir.path()).expect("pages");
        let paths = all_paths();
        assert!(paths.len() > 20, "expected the whole CLI, got {paths:?}");
        assert_eq!(written.len(), paths.len() + 1, "{written:?}");
        let main = std::fs::read_to_string(dir.path().join("raftlock.1")).expect("raftlock.1");
        assert!(main.contains(".TH raftlock 1"), "{main}");
        for path in paths {
            let page = format!("raftlock-{}", path.join("-"));
            let file = dir.path().join(format!("{page}.1"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("no page {}: {e}", file.display()));
            assert!(text.contains(&format!(".TH {page} 1")), "{page}: {text}");
            // The parent page lists this subcommand.
            let parent = if path.len() == 1 {
                "raftlock".to_string()
            } else {
                format!("raftlock-{}", path[..path.len() - 1].join("-"))
            };
            let parent_text = std::fs::read_to_string(dir.path().join(format!("{parent}.1")))
                .expect("parent page");
            let leaf = path.last().expect("non-empty");
            // roff escapes hyphens: `raftlock\-snapshot\-save(1)`.
            let listed = format!("{parent}-{leaf}(1)").replace('-', "\\-");
            assert!(
                parent_text.contains(&listed),
                "{parent}.1 does not list {leaf} as {listed}"
            );
        }
        let lock = std::fs::read_to_string(dir.path().join("raftlock-lock.1")).expect("lock page");
        assert!(lock.contains("\\-\\-wait"), "{lock}");
    }

    /// Each shell's script names every subcommand, nested ones included.
    #[test]
    fn completions_name_every_subcommand() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut command = crate::Cli::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "raftlock", &mut script);
            let script = String::from_utf8(script).expect("utf-8");
            for path in all_paths() {
                let leaf = path.last().expect("non-empty");
                // How each script offers a subcommand: bash by a state per
                // command path, zsh as `'name:about'`, fish as `-a "name"`.
                let entry = match shell {
                    Shell::Bash => format!(
                        "raftlock__subcmd__{}\"",
                        path.join("__subcmd__").replace('-', "__subcmd__")
                    ),
                    Shell::Zsh => format!("'{leaf}:"),
                    _ => format!("-a \"{leaf}\""),
                };
                assert!(
                    script.contains(&entry),
                    "{shell} completions lack {path:?} ({entry})"
                );
            }
            let flag = if shell == Shell::Fish {
                "-l wait"
            } else {
                "--wait"
            };
            assert!(script.contains(flag), "{shell}: no flags");
        }
    }
}
