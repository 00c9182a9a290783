//! Bearer tokens on the command line (docs/security.md): the options every
//! client-side command shares (`--token`, `--token-file`,
//! `RAFTLOCK_TOKEN`), and `raftlock token new`, which makes a token and
//! the config block that grants it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use raftlock_client::{BearerToken, HttpConfig};
use raftlock_server::{hash_token, AuthConfig, Grant, Permission, Token};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};

/// The token a client-side command sends, for a cluster that defines
/// `[[auth.tokens]]`. Without one, requests go out unauthenticated (what
/// a cluster without tokens expects).
#[derive(Args, Clone, Debug, Default)]
pub struct TokenArgs {
    /// Bearer token for a cluster with authentication (prefer
    /// --token-file or RAFTLOCK_TOKEN: a command line is visible to other
    /// users of the host).
    #[arg(long, env = "RAFTLOCK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// File holding the bearer token (surrounding whitespace ignored).
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
}

impl TokenArgs {
    /// The token, if one was given.
    pub fn secret(&self) -> anyhow::Result<Option<String>> {
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?;
            let token = text.trim();
            if token.is_empty() {
                bail!("the token file {} is empty", path.display());
            }
            return Ok(Some(token.to_string()));
        }
        Ok(self
            .token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string))
    }

    /// `Authorization: Bearer …` for a plain reqwest client, or nothing.
    pub fn headers(&self) -> anyhow::Result<HeaderMap> {
        let mut headers = HeaderMap::new();
        if let Some(token) = self.secret()? {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .context("the bearer token is not printable ASCII")?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(headers)
    }

    /// Client settings carrying the token.
    pub fn http_config(&self) -> anyhow::Result<HttpConfig> {
        Ok(HttpConfig {
            token: self.secret()?.map(BearerToken::new),
            ..HttpConfig::default()
        })
    }
}

#[derive(Args)]
pub struct TokenCommandArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Make a token: prints it once, and the [[auth.tokens]] block to add
    /// to the cluster config of every member (which stores only its hash).
    #[command(
        after_help = "Example: raftlock token new billing-jobs --allow billing/=read,lock,write --allow =read\n\
Permissions: read, lock (sessions, acquire/release, elections), write (nodes), \
admin (on the prefix \"\": members, snapshots, every session). An empty prefix \
covers every name."
    )]
    New {
        /// The principal's name (shown as the owner of its sessions).
        name: String,
        /// PREFIX=PERM[,PERM…] (repeatable), e.g. billing/=read,lock.
        #[arg(long = "allow", value_name = "PREFIX=PERMS", required = true, value_parser = parse_grant)]
        grants: Vec<Grant>,
        /// Write the token to this new file (mode 0600) instead of
        /// printing it.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

fn parse_grant(text: &str) -> Result<Grant, String> {
    let (prefix, perms) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?} is not PREFIX=PERMS (e.g. billing/=read,lock)"))?;
    let allow = perms
        .split(',')
        .map(|p| match p.trim() {
            "read" => Ok(Permission::Read),
            "lock" => Ok(Permission::Lock),
            "write" => Ok(Permission::Write),
            "admin" => Ok(Permission::Admin),
            other => Err(format!(
                "unknown permission {other:?} (read, lock, write, admin)"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Grant {
        prefix: prefix.to_string(),
        allow,
    })
}

/// 256 random bits from the operating system's generator, as hex, with a
/// prefix that makes a leaked token easy to recognise (and to scan for).
fn new_secret() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    Ok(format!(
        "rlt_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// The `[[auth.tokens]]` block for `token` (TOML strings of names and
/// prefixes need no escaping: the config's rules allow no quotes).
fn toml_block(token: &Token) -> String {
    let mut text = format!(
        "[[auth.tokens]]\nname = \"{}\"\nsha256 = \"{}\"\ngrants = [\n",
        token.name, token.sha256
    );
    for grant in &token.grants {
        let allow: Vec<String> = grant
            .allow
            .iter()
            .map(|p| format!("\"{}\"", p.as_str()))
            .collect();
        text += &format!(
            "    {{ prefix = \"{}\", allow = [{}] }},\n",
            grant.prefix,
            allow.join(", ")
        );
    }
    text + "]\n"
}

pub fn run(args: TokenCommandArgs) -> anyhow::Result<()> {
    let TokenCommand::New { name, grants, out } = args.command;
    let secret = new_secret()?;
    let token = Token {
        name,
        sha256: hash_token(&secret),
        grants,
    };
    // The rules a member applies when it loads the block.
    AuthConfig {
        tokens: vec![token.clone()],
    }
    .validate()?;
    let mut stdout = std::io::stdout().lock();
    match out {
        Some(path) => {
            write_secret(&path, &secret)?;
            writeln!(
                stdout,
                "# Token for {:?} written to {}.",
                token.name,
                path.display()
            )?;
        }
        None => {
            writeln!(
                stdout,
                "# Token for {:?}; shown once, only its hash is kept:",
                token.name
            )?;
            writeln!(stdout, "{secret}")?;
        }
    }
    writeln!(
        stdout,
        "\n# Add to the cluster config of every member, then restart them one by one:"
    )?;
    write!(stdout, "{}", toml_block(&token))?;
    Ok(())
}

/// Creates `path` readable by its owner only; refuses to overwrite.
fn write_secret(path: &std::path::Path, secret: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {} (it must not exist)", path.display()))?;
    writeln!(file, "{secret}").with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse_and_blocks_load_back() {
        let billing = parse_grant("billing/=read,lock").expect("grant");
        assert_eq!(billing.prefix, "billing/");
        assert_eq!(billing.allow, [Permission::Read, Permission::Lock]);
        let all = parse_grant("=admin").expect("empty prefix");
        assert_eq!(all.prefix, "");
        assert!(parse_grant("billing/").is_err());
        assert!(parse_grant("a=rwx").is_err());
        let secret = new_secret().expect("random");
        assert_eq!(secret.len(), 4 + 64);
        assert_ne!(secret, new_secret().expect("random"));
        let token = Token {
            name: "jobs".into(),
            sha256: hash_token(&secret),
            grants: vec![billing, all],
        };
        let text = toml_block(&token);
        let config = raftlock_server::ApiConfig::from_cluster_toml(&text).expect("loads");
        assert_eq!(config.auth.tokens, [token]);
        assert_eq!(
            config.auth.find(&secret).map(|t| t.name.as_str()),
            Some("jobs")
        );
    }
}
