//! Runs real `raftlock serve` processes on free loopback ports, each with
//! its own sled directory, and talks to them over HTTP.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

pub const RAFTLOCK: &str = env!("CARGO_BIN_EXE_raftlock");

/// Free loopback ports below the ephemeral range (see
/// `raftlock_jepsen::control::setup::free_addrs` for why not port 0).
fn free_ports(n: usize) -> Vec<u16> {
    raftlock_jepsen::control::setup::free_addrs(n)
        .expect("free loopback ports")
        .iter()
        .map(|a| a.port())
        .collect()
}

pub struct ProcessCluster {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub api: Vec<String>,
    processes: Vec<Option<Child>>,
    pub http: reqwest::Client,
}

impl ProcessCluster {
    pub fn start(size: usize) -> ProcessCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = free_ports(2 * size);
        let mut text = String::from(
            "[cluster]\ndata_dir = \".\"\nheartbeat_interval_ms = 50\n\
             election_timeout_min_ms = 300\nelection_timeout_max_ms = 600\n",
        );
        let mut api = Vec::new();
        for i in 0..size {
            text += &format!(
                "[[members]]\nid = {}\napi_addr = \"127.0.0.1:{}\"\nraft_addr = \"127.0.0.1:{}\"\n",
                i + 1,
                ports[i],
                ports[size + i]
            );
            api.push(format!("http://127.0.0.1:{}", ports[i]));
        }
        let config = dir.path().join("cluster.toml");
        std::fs::write(&config, text).expect("write config");
        let mut cluster = ProcessCluster {
            dir,
            config,
            api,
            processes: (0..size).map(|_| None).collect(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(40))
                .build()
                .expect("http client"),
        };
        for id in 1..=size as u64 {
            cluster.start_member(id);
        }
        cluster
    }

    pub fn start_member(&mut self, id: u64) {
        let log = std::fs::File::create(self.dir.path().join(format!("node-{id}.log")))
            .expect("log file");
        let child = Command::new(RAFTLOCK)
            .args(["serve", "--config"])
            .arg(&self.config)
            .args(["--id", &id.to_string()])
            .env("RUST_LOG", "info,openraft=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .expect("spawn raftlock serve");
        self.processes[(id - 1) as usize] = Some(child);
    }

    /// kill -9: no shutdown path runs.
    pub fn kill9(&mut self, id: u64) {
        if let Some(mut child) = self.processes[(id - 1) as usize].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last lines of every member's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for id in 1..=self.processes.len() {
            let path = self.dir.path().join(format!("node-{id}.log"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out += &format!("--- member {id} ({})\n", path.display());
            for line in &lines[lines.len().saturating_sub(40)..] {
                out += line;
                out += "\n";
            }
        }
        out
    }

    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    pub fn url(&self, id: u64, path: &str) -> String {
        format!("{}{path}", self.api[(id - 1) as usize])
    }

    pub async fn post(&self, id: u64, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(self.url(id, path))
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, id: u64, path: &str) -> (u16, Value) {
        match self.http.get(self.url(id, path)).send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                (status, r.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    pub async fn put(&self, id: u64, path: &str, body: Value) -> Result<u16, reqwest::Error> {
        let response = self.http.put(self.url(id, path)).json(&body).send().await?;
        Ok(response.status().as_u16())
    }

    /// Waits until every listed member answers /v1/health with 200 and
    /// they agree on a leader among them; returns it.
    pub async fn leader(&self, members: &[u64]) -> u64 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut leaders = Vec::new();
            for id in members {
                let (health, _) = self.get(*id, "/v1/health").await;
                let (_, cluster) = self.get(*id, "/v1/cluster").await;
                if health == 200 {
                    leaders.push(cluster["leader_id"].as_u64());
                }
            }
            if leaders.len() == members.len() {
                if let Some(Some(leader)) = leaders.first() {
                    if leaders.iter().all(|l| *l == Some(*leader)) && members.contains(leader) {
                        return *leader;
                    }
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no healthy leader among {members:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn open_session(&self, id: u64, owner: &str, ttl_ms: u64) -> String {
        let (status, body) = self
            .post(
                id,
                "/v1/sessions",
                json!({"ttl_ms": ttl_ms, "owner": owner}),
            )
            .await;
        assert_eq!(status, 201, "open session: {body}");
        body["session_id"].as_str().expect("session id").to_string()
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for id in 1..=self.processes.len() as u64 {
            self.kill9(id);
        }
    }
}
