//! Runs real `raftlock serve` processes on free loopback ports, each with
//! its own sled directory, and talks to them over HTTP. The command line
//! of a member is the shared launcher's (`raftlock_testkit::process`).

#![allow(dead_code)]

pub mod load;
pub mod pin;
pub mod tls;

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use raftlock_testkit::process::{spawn_pinned, NodeSpec};
use serde_json::{json, Value};

pub const RAFTLOCK: &str = env!("CARGO_BIN_EXE_raftlock");

/// Free loopback ports below the ephemeral range (see
/// `raftlock_jepsen::control::setup::free_addrs` for why not port 0).
pub fn free_ports(n: usize) -> Vec<u16> {
    raftlock_jepsen::control::setup::free_addrs(n)
        .expect("free loopback ports")
        .iter()
        .map(|a| a.port())
        .collect()
}

/// What [`ProcessCluster::hold_and_queue`] set up.
pub struct HeldAndQueued {
    pub holder: String,
    pub waiter: String,
    /// The holder's fencing token.
    pub token: u64,
    /// The waiter's long poll, answered when it is granted (or fails).
    pub waiting: tokio::task::JoinHandle<Result<reqwest::Response, reqwest::Error>>,
}

pub struct ProcessCluster {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// API base URL of member `id` at index `id - 1`, spares included.
    pub api: Vec<String>,
    /// Raft address (`host:port`) of member `id` at index `id - 1`.
    pub raft: Vec<String>,
    processes: Vec<Option<Child>>,
    pub http: reqwest::Client,
    /// The core members started from now on are confined to (`pin`).
    member_cpu: Option<usize>,
}

impl ProcessCluster {
    pub fn start(size: usize) -> ProcessCluster {
        let mut cluster = Self::configure(size);
        for id in 1..=size as u64 {
            cluster.start_member(id);
        }
        cluster
    }

    /// Starts a `size`-member cluster with ports for `spares` more
    /// (see [`configure_with_spares`](Self::configure_with_spares)).
    pub fn start_with_spares(size: usize, spares: usize) -> ProcessCluster {
        let mut cluster = Self::configure_with_spares(size, spares);
        for id in 1..=size as u64 {
            cluster.start_member(id);
        }
        cluster
    }

    /// Writes the config of a `size`-member cluster on fresh ports and
    /// starts nothing (to seed the data directories first).
    pub fn configure(size: usize) -> ProcessCluster {
        Self::configure_with_spares(size, 0)
    }

    /// As [`configure`](Self::configure), with ports for `spares` more
    /// members (ids `size + 1 ..`) that the config does not list: they
    /// join at run time (`start_joining`).
    pub fn configure_with_spares(size: usize, spares: usize) -> ProcessCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let total = size + spares;
        let ports = free_ports(2 * total);
        let mut text = String::from(
            "[cluster]\ndata_dir = \".\"\nheartbeat_interval_ms = 50\n\
             election_timeout_min_ms = 300\nelection_timeout_max_ms = 600\n",
        );
        let mut api = Vec::new();
        let mut raft = Vec::new();
        for i in 0..total {
            if i < size {
                text += &format!(
                    "[[members]]\nid = {}\napi_addr = \"127.0.0.1:{}\"\nraft_addr = \"127.0.0.1:{}\"\n",
                    i + 1,
                    ports[i],
                    ports[total + i]
                );
            }
            api.push(format!("http://127.0.0.1:{}", ports[i]));
            raft.push(format!("127.0.0.1:{}", ports[total + i]));
        }
        let config = dir.path().join("cluster.toml");
        std::fs::write(&config, text).expect("write config");
        // reqwest is built without a default TLS provider (crates/raftlock-tls).
        raftlock_tls::install_default_provider();
        ProcessCluster {
            dir,
            config,
            api,
            raft,
            processes: (0..total).map(|_| None).collect(),
            member_cpu: None,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(40))
                .build()
                .expect("http client"),
        }
    }

    /// Sends `token` as `Authorization: Bearer` with every request of
    /// [`http`](Self::http) from now on (for a config with tokens).
    pub fn use_token(&mut self, token: &str) {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = format!("Bearer {token}").parse().expect("header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
        self.http = reqwest::Client::builder()
            .timeout(Duration::from_secs(40))
            .default_headers(headers)
            .build()
            .expect("http client");
    }

    /// Confines members started from now on to `cpu` (the full-size
    /// overload runs, `pin`).
    pub fn pin_members(&mut self, cpu: usize) {
        self.member_cpu = Some(cpu);
    }

    pub fn start_member(&mut self, id: u64) {
        self.spawn_member(id, &[]);
    }

    /// Starts spare member `id` with `--join` through the API of
    /// `through` (member ids): it asks the cluster to add it.
    pub fn start_joining(&mut self, id: u64, through: &[u64]) {
        self.start_joining_with(id, through, &[]);
    }

    /// As [`start_joining`](Self::start_joining), with more `serve` flags
    /// (e.g. `--token-file` for a cluster with tokens).
    pub fn start_joining_with(&mut self, id: u64, through: &[u64], extra: &[String]) {
        let endpoints: Vec<String> = through.iter().map(|m| self.url(*m, "")).collect();
        let i = (id - 1) as usize;
        let mut args = vec![
            "--join".to_string(),
            endpoints.join(","),
            "--api-addr".to_string(),
            self.api[i]
                .trim_start_matches("http://")
                .trim_start_matches("https://")
                .to_string(),
            "--raft-addr".to_string(),
            self.raft[i].clone(),
        ];
        args.extend_from_slice(extra);
        self.spawn_member(id, &args);
    }

    /// Starts member `id` with another config file than the cluster's
    /// (a member with other certificates, say).
    pub fn start_member_with_config(&mut self, id: u64, config: &std::path::Path) {
        self.spawn_with(id, config.to_path_buf(), &[]);
    }

    fn spawn_member(&mut self, id: u64, extra: &[String]) {
        self.spawn_with(id, self.config.clone(), extra);
    }

    fn spawn_with(&mut self, id: u64, config: PathBuf, extra: &[String]) {
        // Another build of `raftlock` for a before/after measurement
        // (tests/overload.rs, docs/overload.md); this build's by default.
        let binary =
            std::env::var("RAFTLOCK_SERVE_BINARY").unwrap_or_else(|_| RAFTLOCK.to_string());
        let spec = NodeSpec {
            id,
            bin: binary.into(),
            control: None,
            config,
            peers: Vec::new(),
            extra: extra.to_vec(),
            log: self.dir.path().join(format!("node-{id}.log")),
            cpu: self.member_cpu,
        };
        let child = spec
            .command()
            .and_then(|mut command| spawn_pinned(spec.cpu, || command.spawn()))
            .expect("spawn raftlock serve");
        self.processes[(id - 1) as usize] = Some(child);
    }

    /// The process id of member `id`, while it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.processes[(id - 1) as usize].as_ref().map(Child::id)
    }

    /// Appends `text` (TOML tables, e.g. `[api]`) to the cluster file, for
    /// members started after this call.
    pub fn append_config(&self, text: &str) {
        let mut config = std::fs::read_to_string(&self.config).expect("read config");
        config.push('\n');
        config.push_str(text);
        std::fs::write(&self.config, config).expect("write config");
    }

    /// Waits up to `within` for member `id`'s process to exit on its
    /// own; its exit status, or `None` if it still runs.
    pub fn wait_exit(&mut self, id: u64, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + within;
        let child = self.processes[(id - 1) as usize].as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
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

    /// `GET /v1/cluster/members` on member `id` (status 0 if unreachable).
    pub async fn membership(&self, id: u64) -> (u16, Value) {
        self.get(id, "/v1/cluster/members").await
    }

    /// The voter ids member `id` reports.
    pub async fn voters(&self, id: u64) -> Vec<u64> {
        let (_, view) = self.membership(id).await;
        let mut voters: Vec<u64> = view["members"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .filter(|m| m["voter"].as_bool() == Some(true))
                    .filter_map(|m| m["id"].as_u64())
                    .collect()
            })
            .unwrap_or_default();
        voters.sort_unstable();
        voters
    }

    /// Waits until every member of `asked` reports exactly `voters` as
    /// the voters, outside a joint configuration.
    pub async fn await_voters(&self, asked: &[u64], voters: &[u64]) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let mut agree = true;
            for id in asked {
                let (_, view) = self.membership(*id).await;
                agree &= view["joint"].as_bool() == Some(false) && self.voters(*id).await == voters;
            }
            if agree {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "members {asked:?} never agreed on voters {voters:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn delete(&self, id: u64, path: &str) -> (u16, Value) {
        let response = self
            .http
            .delete(self.url(id, path))
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A holder of lock `job` (session opened and granted through
    /// `holder_via`) and a waiter queued behind it, long-polling for
    /// `wait_ms` through `waiter_via`; returns once the queue shows it.
    pub async fn hold_and_queue(
        &self,
        holder_via: u64,
        waiter_via: u64,
        wait_ms: u64,
    ) -> HeldAndQueued {
        let holder = self.open_session(holder_via, "holder", 60_000).await;
        let waiter = self.open_session(waiter_via, "waiter", 60_000).await;
        let (status, held) = self
            .post(
                holder_via,
                "/v1/locks/job/acquire",
                json!({"session_id": holder, "wait_ms": 0}),
            )
            .await;
        assert_eq!(status, 200, "{held}");
        let token = held["fencing_token"].as_u64().expect("token");
        let waiting = {
            let http = self.http.clone();
            let url = self.url(waiter_via, "/v1/locks/job/acquire");
            let body = json!({"session_id": waiter, "wait_ms": wait_ms});
            tokio::spawn(async move { http.post(url).json(&body).send().await })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (_, lock) = self.get(holder_via, "/v1/locks/job").await;
            if lock["waiters"].as_array().is_some_and(|w| w.len() == 1) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "waiter never queued: {lock}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        HeldAndQueued {
            holder,
            waiter,
            token,
            waiting,
        }
    }

    /// Opens a session through member `id`. `no_leader` (nothing was
    /// done) is retried for up to 10 s, as clients do: a member starved of
    /// CPU by the rest of the suite can miss heartbeats and see an
    /// election just as a test starts.
    pub async fn open_session(&self, id: u64, owner: &str, ttl_ms: u64) -> String {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (status, body) = self
                .post(
                    id,
                    "/v1/sessions",
                    json!({"ttl_ms": ttl_ms, "owner": owner}),
                )
                .await;
            let no_leader = status == 503 && body["error"] == "no_leader";
            if no_leader && tokio::time::Instant::now() < give_up {
                // The client's back-off (a retry schedule, not a wait for
                // some event).
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            assert_eq!(status, 201, "open session: {body}");
            return body["session_id"].as_str().expect("session id").to_string();
        }
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for id in 1..=self.processes.len() as u64 {
            self.kill9(id);
        }
    }
}
