//! `raftlock snapshot save|restore|inspect`: backups of a live cluster and
//! seeding a new cluster from one (format: `raftlock_node::Backup`).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use raftlock_node::{Backup, NodeConfig, NodeId};
use serde_json::Value;

use crate::inspect::Endpoints;

#[derive(Args)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Save a consistent backup of a live cluster (as of a linearizable
    /// point, with checksums) to FILE.
    Save {
        /// Where to write the backup (replaced atomically if it exists).
        file: PathBuf,
        #[command(flatten)]
        endpoints: Endpoints,
    },
    /// Seed the empty data directory of one member of a NEW cluster from
    /// FILE. Run it for every member (same file, same config), then start
    /// them with `raftlock serve`.
    Restore {
        /// The backup to restore.
        file: PathBuf,
        /// The new cluster's config file; its members become the voters.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The member to seed.
        #[arg(long)]
        id: NodeId,
    },
    /// Verify FILE (checksums, decoding) and print what it holds.
    Inspect {
        /// The backup to inspect.
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    match args.command {
        SnapshotCommand::Save { file, endpoints } => save(&file, &endpoints).await,
        SnapshotCommand::Restore { file, config, id } => restore(&file, &config, id),
        SnapshotCommand::Inspect { file, json } => inspect(&file, json),
    }
}

/// Fetches a backup from the first endpoint that gives one, verifies it,
/// and writes it durably.
async fn save(file: &Path, endpoints: &Endpoints) -> anyhow::Result<()> {
    let backup = fetch(endpoints).await?;
    write_durably(file, backup.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    let h = backup.header();
    println!(
        "saved {}: revision {}, applied index {}, {} bytes, crc32:{:08x}",
        file.display(),
        h.revision,
        h.applied_index,
        backup.as_bytes().len(),
        h.body_crc
    );
    Ok(())
}

async fn fetch(endpoints: &Endpoints) -> anyhow::Result<Backup> {
    // The server answers within its leader wait (3 s by default) plus the
    // time to encode and send the state: generous for large states.
    let http = endpoints
        .tls
        .http()?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(600))
        .default_headers(endpoints.token.headers()?)
        .build()?;
    let mut last_error = None;
    for endpoint in endpoints.urls() {
        let url = format!("{}/v1/snapshot", endpoint.trim_end_matches('/'));
        let response = match http.get(&url).send().await {
            Ok(response) => response,
            Err(e) => {
                last_error = Some(anyhow!("{url}: {e}"));
                continue;
            }
        };
        let status = response.status();
        if !status.is_success() {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            last_error = Some(anyhow!(
                "{url}: {status} {}",
                body["message"].as_str().unwrap_or("")
            ));
            continue;
        }
        let bytes = match response.bytes().await {
            Ok(bytes) => bytes.to_vec(),
            Err(e) => {
                last_error = Some(anyhow!("{url}: reading the backup: {e}"));
                continue;
            }
        };
        // Verified before anything is written: a damaged transfer never
        // becomes a backup file.
        return Backup::from_bytes(bytes).with_context(|| format!("{url}: invalid backup"));
    }
    Err(last_error.unwrap_or_else(|| anyhow!("no endpoints given")))
}

/// Writes `bytes` to `file` so that a crash leaves the old file or the
/// whole new one: a temp file beside it, fsync, rename, fsync the folder.
fn write_durably(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = file
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file name"))?;
    let mut temp_name = name.to_os_string();
    temp_name.push(".tmp");
    let temp = dir.join(temp_name);
    let written = File::create(&temp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    fs::rename(&temp, file)?;
    File::open(&dir)?.sync_all()
}

fn restore(file: &Path, config_path: &Path, id: NodeId) -> anyhow::Result<()> {
    let backup = Backup::read_file(file)?;
    let config = NodeConfig::from_cluster_file(config_path, id)?;
    let restored = raftlock_node::restore(&backup, &config)?;
    println!(
        "restored member {id} into {}: revision {}, applied index {}, members {:?}",
        crate::display_path(&restored.data_dir).display(),
        restored.revision,
        restored.applied_index,
        restored.members
    );
    println!(
        "start it with: raftlock serve --config {} --id {id}",
        config_path.display()
    );
    Ok(())
}

fn inspect(file: &Path, json: bool) -> anyhow::Result<()> {
    let summary = Backup::read_file(file)?.summary()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    println!("backup:        {}", file.display());
    println!("format:        {}", summary.format);
    println!("revision:      {}", summary.revision);
    println!("applied index: {}", summary.applied_index);
    println!("size:          {} bytes", summary.bytes);
    println!("checksum:      {} (verified)", summary.checksum);
    println!("sessions:      {}", summary.sessions);
    println!("nodes:         {}", summary.nodes);
    println!("locks:         {} held", summary.locks);
    println!("elections:     {} led", summary.elections);
    println!("waiters:       {}", summary.waiters);
    Ok(())
}
