//! A standalone ZooKeeper 3.8 server (Debian's `zookeeper` package) for
//! the tests that use a real one as the reference: started on a free
//! port, waited for by polling its port, killed on drop. Without `java`
//! or ZooKeeper's jar it says why and is absent, except in CI (`CI=true`),
//! where a missing server fails the test: scripts/install-zookeeper.sh
//! installs it there.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ZK_JAR: &str = "/usr/share/java/zookeeper.jar";

/// A standalone ZooKeeper server, killed on drop.
pub struct ZooKeeper {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

fn java() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("java"))
            .find(|p| p.is_file())
    })
}

/// Says why the server cannot run: a panic in CI, a SKIP line elsewhere.
fn unavailable(why: &str) -> Option<ZooKeeper> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}: CI must run the real-ZooKeeper tests (scripts/install-zookeeper.sh)");
    }
    eprintln!("SKIP: {why} (scripts/install-zookeeper.sh installs it)");
    None
}

impl ZooKeeper {
    /// Starts a server (TTL nodes enabled, no fsync: a test's data need
    /// not survive a power cut), or says why it cannot and returns `None`.
    pub fn start() -> Option<Self> {
        let Some(java) = java() else {
            return unavailable("no `java` on PATH");
        };
        if !Path::new(ZK_JAR).is_file() {
            return unavailable(&format!("{ZK_JAR} missing"));
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        let cfg = dir.path().join("zoo.cfg");
        std::fs::write(
            &cfg,
            format!(
                "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                 admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n",
                data.display()
            ),
        )
        .expect("write zoo.cfg");
        let log = std::fs::File::create(dir.path().join("server.log")).expect("log file");
        let child = Command::new(java)
            .arg("-Dzookeeper.extendedTypesEnabled=true")
            .arg("-Dzookeeper.forceSync=no")
            .arg("-cp")
            .arg(ZK_JAR)
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("start ZooKeeper");
        let mut zk = Self { child, port, dir };
        zk.wait_ready();
        Some(zk)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Polls the port with `srvr` until the server says it serves: `ruok`
    /// answers `imok` as soon as the port is open, before sessions can be
    /// made.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("poll child") {
                panic!("ZooKeeper exited ({status}): {}", self.log());
            }
            if serving(&self.addr()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ZooKeeper not ready in 60 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

fn serving(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = Vec::new();
    s.write_all(b"srvr").is_ok()
        && s.read_to_end(&mut answer).is_ok()
        && String::from_utf8_lossy(&answer).contains("Mode: standalone")
}
