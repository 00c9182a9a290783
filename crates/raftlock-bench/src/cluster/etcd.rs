//! etcd 3.4: three `etcd` processes with a static initial cluster, default
//! durability (WAL fsync on), clients on their JSON gateway.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::{absolute, free_ports, Member, Spawn, Tools};

pub fn specs(tools: &Tools, dir: &Path) -> anyhow::Result<Vec<(u32, u16, Spawn)>> {
    let ports = free_ports(6)?;
    let dir = absolute(dir);
    let peer = |i: usize| format!("http://127.0.0.1:{}", ports[3 + i]);
    let initial: Vec<String> = (0..3).map(|i| format!("m{}={}", i + 1, peer(i))).collect();
    let initial = initial.join(",");
    Ok((0..3usize)
        .map(|i| {
            let id = i as u32 + 1;
            let client = format!("http://127.0.0.1:{}", ports[i]);
            let args = vec![
                format!("--name=m{id}"),
                format!("--data-dir={}", dir.join(format!("member-{id}")).display()),
                format!("--listen-client-urls={client}"),
                format!("--advertise-client-urls={client}"),
                format!("--listen-peer-urls={}", peer(i)),
                format!("--initial-advertise-peer-urls={}", peer(i)),
                format!("--initial-cluster={initial}"),
                "--initial-cluster-token=raftlock-bench".into(),
                "--initial-cluster-state=new".into(),
                "--logger=zap".into(),
                "--log-outputs=stderr".into(),
            ];
            let spawn = Spawn {
                program: tools.etcd.clone(),
                args,
                cwd: dir.clone(),
                log: dir.join(format!("member-{id}.log")),
            };
            (id, ports[i], spawn)
        })
        .collect())
}

pub async fn healthy(http: &reqwest::Client, m: &Member) -> bool {
    let Ok(resp) = http
        .get(format!("http://{}/health", m.addr()))
        .timeout(Duration::from_secs(2))
        .send()
        .await
    else {
        return false;
    };
    resp.json::<Value>()
        .await
        .is_ok_and(|v| v.get("health").and_then(Value::as_str) == Some("true"))
}

/// Each live member's own id (`header.member_id`) and its view of the leader.
pub async fn leader(http: &reqwest::Client, members: &[Member]) -> Option<usize> {
    let mut ids = Vec::new();
    let mut leader = None;
    for m in members {
        if m.pid().is_none() {
            ids.push(None);
            continue;
        }
        let status = http
            .post(format!("http://{}/v3/maintenance/status", m.addr()))
            .json(&json!({}))
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        let v = match status {
            Ok(r) => r.json::<Value>().await.ok(),
            Err(_) => None,
        };
        let own = v
            .as_ref()
            .and_then(|v| v.pointer("/header/member_id"))
            .and_then(as_id);
        let l = v.as_ref().and_then(|v| v.get("leader")).and_then(as_id);
        if leader.is_none() {
            leader = l.filter(|&l| l != 0);
        }
        ids.push(own);
    }
    let leader = leader?;
    ids.iter().position(|&id| id == Some(leader))
}

/// The gateway writes 64-bit integers as strings.
pub fn as_id(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

pub fn version(program: &Path) -> String {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "etcd".into())
}
