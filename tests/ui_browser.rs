//! The dashboard (`/ui`) in a real browser: headless Chromium, driven
//! through chromedriver's WebDriver HTTP protocol, against a 3-member
//! cluster of real `raftlock serve` processes. Asserts on the page's DOM,
//! polled with a deadline: a held lock appears with its holder and fencing
//! token, a release makes it disappear, a killed member shows as down,
//! the plots draw and follow a load of acquires, and the death of the
//! member serving the page is said, not waited on.
//!
//! Needs `chromium` and `chromedriver` (Debian packages `chromium` and
//! `chromium-driver`): `scripts/install-chromium.sh`, which `.ci/run` calls.
//! Without them the test fails and says so; it never skips.
//!
//! The screenshot goes to `target/tmp/ui.png`; with
//! `RAFTLOCK_UI_SCREENSHOT=docs/ui.png` (a path relative to the repository)
//! it also replaces the README's screenshot.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use support::ProcessCluster;

const DEADLINE: Duration = Duration::from_secs(30);

/// `name` on the PATH, or a failure naming the install script.
fn required_program(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "`{name}` is not on the PATH: the dashboard's browser test needs \
             headless Chromium and chromedriver. Install them with \
             scripts/install-chromium.sh (Debian packages chromium and chromium-driver)."
        )
    })
}

/// A chromedriver process and one browser session in it; both end on drop.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
}

impl Browser {
    async fn start() -> Browser {
        let chromium = required_program("chromium");
        let chromedriver = required_program("chromedriver");
        let port = support::free_ports(1)[0];
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        // reqwest is built without a default TLS provider (crates/raftlock-tls).
        raftlock_tls::install_default_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            http,
        };
        browser.await_driver().await;
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                // --no-sandbox: CI containers run as root, where Chromium's
                // sandbox refuses to start.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1360,1000",
                         "--hide-scrollbars"]
            }
        }}});
        let created = browser.command("POST", "/session", capabilities).await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_string();
        browser
    }

    async fn await_driver(&self) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let status = self.http.get(format!("{}/status", self.base)).send().await;
            if let Ok(response) = status {
                let body: Value = response.json().await.unwrap_or(Value::Null);
                if body["value"]["ready"] == json!(true) {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One WebDriver command; returns its `value`.
    async fn command(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "POST" => self.http.post(url).json(&body),
            "DELETE" => self.http.delete(url),
            _ => self.http.get(url),
        };
        let response = request.send().await.expect("WebDriver request");
        let status = response.status();
        let body: Value = response.json().await.expect("WebDriver JSON");
        assert!(status.is_success(), "WebDriver {method} {path}: {body}");
        body["value"].clone()
    }

    async fn session_command(&self, method: &str, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.command(method, &path, body).await
    }

    async fn open(&self, url: &str) {
        self.session_command("POST", "/url", json!({"url": url}))
            .await;
    }

    /// Runs `script` (a function body) in the page and returns its result.
    async fn run(&self, script: &str) -> Value {
        self.session_command(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    /// Polls `script` until `done` accepts its result, or fails after the
    /// deadline with the last result.
    async fn wait_for(&self, what: &str, script: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let value = self.run(script).await;
            if done(&value) {
                return value;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the page never showed {what}; last: {value}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `text` into the element `css` selects, as a user would.
    async fn type_into(&self, css: &str, text: &str) {
        let found = self
            .session_command(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        let id = found["element-6066-11e4-a52e-4f735466cecf"]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string();
        self.session_command(
            "POST",
            &format!("/element/{id}/value"),
            json!({"text": text}),
        )
        .await;
    }

    async fn screenshot(&self, path: &Path) {
        let png = self
            .session_command("GET", "/screenshot", Value::Null)
            .await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64 screenshot"))
            .expect("screenshot is base64");
        std::fs::write(path, bytes).expect("write screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The locks table as `[{lock, holder, fencing, waiters}]`.
const LOCK_ROWS: &str = r#"
return [...document.querySelectorAll('#locks tbody tr[data-lock]')].map(r => ({
  lock: r.dataset.lock,
  held_off: r.dataset.heldOff === 'true',
  holder: r.querySelector('.holder').textContent,
  fencing: r.querySelector('.fencing').textContent,
  waiters: [...r.querySelectorAll('.waiters li')].map(li => li.textContent),
}));"#;

/// The read-write locks and semaphores table as `[{name, kind, holders, permits}]`.
const SHARED_ROWS: &str = r#"
return [...document.querySelectorAll('#shared tbody tr[data-shared]')].map(r => ({
  name: r.dataset.shared,
  kind: r.dataset.kind,
  holders: [...r.querySelectorAll('.shared-holders li')].map(li => li.textContent),
  permits: r.children[3].textContent,
}));"#;

/// The sessions table as `{owner: [holds, waits]}`.
const SESSION_ROWS: &str = r#"
const out = {};
for (const r of document.querySelectorAll('#sessions tbody tr[data-session]'))
  out[r.children[1].textContent] = [r.querySelector('.session-holds').textContent,
                                    r.querySelector('.session-waits').textContent];
return out;"#;

/// The members table as `{id: state}`.
const MEMBER_STATES: &str = r#"
const out = {};
for (const r of document.querySelectorAll('#members tbody tr[data-member-id]'))
  out[r.dataset.memberId] = r.dataset.state;
return out;"#;

/// The plots as `{figure id: {series: {last, points, drawn}}}`: `drawn`
/// is the browser's own measure of the path (laid out, non-empty).
const PLOTS: &str = r#"
const out = {};
for (const f of document.querySelectorAll('#trends figure.plot')) {
  const svg = f.querySelector('svg.plot-area');
  const series = {};
  for (const p of svg.querySelectorAll('path.line')) {
    const box = p.getBBox();
    series[p.dataset.series] = {
      last: p.dataset.last === '' ? null : Number(p.dataset.last),
      points: Number(p.dataset.points),
      drawn: p.getAttribute('visibility') !== 'hidden' && p.getTotalLength() > 0
        && box.width > 0 && svg.getBoundingClientRect().width > 100,
    };
  }
  out[f.id] = series;
}
return out;"#;

/// The last value of one plotted series (`None` while unknown).
fn plotted(plots: &Value, figure: &str, series: &str) -> Option<f64> {
    plots[figure][series]["last"].as_f64()
}

/// Acquires and releases one lock through member `via` in a loop until
/// `stop` is set: the load the plots must follow.
fn acquire_release_load(
    cluster: &ProcessCluster,
    via: u64,
    session: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    let http = cluster.http.clone();
    let acquire = cluster.url(via, "/v1/locks/jobs/thumbnails/acquire");
    let release = cluster.url(via, "/v1/locks/jobs/thumbnails/release");
    tokio::spawn(async move {
        let mut grants = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let body = json!({"session_id": session, "wait_ms": 1000});
            let granted = http.post(&acquire).json(&body).send().await;
            if granted.is_ok_and(|r| r.status().is_success()) {
                grants += 1;
            }
            let body = json!({"session_id": session});
            let _ = http.post(&release).json(&body).send().await;
        }
        grants
    })
}

fn lock_row<'a>(rows: &'a Value, name: &str) -> Option<&'a Value> {
    rows.as_array()?.iter().find(|r| r["lock"] == json!(name))
}

async fn acquire(cluster: &ProcessCluster, via: u64, lock: &str, session: &str) -> u64 {
    let path = format!("/v1/locks/{lock}/acquire");
    let (status, body) = cluster
        .post(via, &path, json!({"session_id": session, "wait_ms": 0}))
        .await;
    assert_eq!(status, 200, "acquire {lock}: {body}");
    body["fencing_token"].as_u64().expect("fencing token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_locks_and_a_down_member_in_chromium() {
    let browser = Browser::start().await;
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.leader(&[1, 2, 3]).await;
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    // Served by a follower, which learns of the other follower's death
    // only through its own probes (GET /v1/cluster/reachability).
    let (serving, victim) = (followers[0], followers[1]);

    let worker = cluster.open_session(leader, "worker-7", 120_000).await;
    let token = acquire(&cluster, leader, "orders/42", &worker).await;
    // Two more holders, so the screenshot looks like a cluster in use.
    let importer = cluster.open_session(leader, "importer-eu", 120_000).await;
    acquire(&cluster, leader, "inventory/sku-1138", &importer).await;
    acquire(&cluster, leader, "payments/settlement-2026-11", &importer).await;
    let cron = cluster.open_session(leader, "cron-nightly", 120_000).await;
    acquire(&cluster, leader, "reports/daily", &cron).await;
    // A waiter behind worker-7, and an elected leader, for the screenshot.
    let billing = cluster.open_session(leader, "billing-2", 120_000).await;
    let waiting = {
        let http = cluster.http.clone();
        let url = cluster.url(leader, "/v1/locks/orders/42/acquire");
        let body = json!({"session_id": billing, "wait_ms": 120_000});
        tokio::spawn(async move { http.post(url).json(&body).send().await })
    };
    let (status, body) = cluster
        .post(
            leader,
            "/v1/elections/scheduler/campaign",
            json!({"session_id": cron, "value": "10.0.3.17:9000", "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "campaign: {body}");
    // Two readers of a read-write lock, a semaphore's permit, and a lock
    // held off by its lock-delay after its holder's session was closed.
    for session in [&worker, &importer] {
        let (status, body) = cluster
            .post(
                leader,
                "/v1/rwlocks/config/routes/acquire",
                json!({"session_id": session, "mode": "read", "wait_ms": 0}),
            )
            .await;
        assert_eq!(status, 200, "read lock: {body}");
    }
    let (status, body) = cluster
        .post(
            leader,
            "/v1/semaphores/exports/acquire",
            json!({"session_id": cron, "permits": 3, "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "semaphore: {body}");
    let stuck = cluster.open_session(leader, "stuck-writer", 120_000).await;
    let (status, body) = cluster
        .post(
            leader,
            "/v1/locks/ledger/acquire",
            json!({"session_id": stuck, "lock_delay_ms": 60_000, "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "acquire with a lock-delay: {body}");
    let (status, body) = cluster
        .delete(leader, &format!("/v1/sessions/{stuck}"))
        .await;
    assert_eq!(status, 204, "close the holder's session: {body}");

    browser.open(&cluster.url(serving, "/ui")).await;
    // The plots' rates: every grant so far went through the leader, so
    // the serving member's grant rate is 0 once it has 5 s of samples.
    browser
        .wait_for("a grant rate of 0 before the load", PLOTS, |p| {
            plotted(p, "plot-grants", "grants/s") == Some(0.0)
        })
        .await;
    let thumbnailer = cluster.open_session(serving, "thumbnailer", 120_000).await;
    let stop_load = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = acquire_release_load(&cluster, serving, thumbnailer, stop_load.clone());
    let rows = browser
        .wait_for("orders/42 held by worker-7", LOCK_ROWS, |rows| {
            lock_row(rows, "orders/42").is_some_and(|r| {
                r["holder"].as_str().is_some_and(|h| h.contains("worker-7"))
                    && r["fencing"] == json!(token.to_string())
                    && r["waiters"].as_array().is_some_and(|w| w.len() == 1)
            })
        })
        .await;
    let orders = lock_row(&rows, "orders/42").expect("row");
    assert!(orders["waiters"][0]
        .as_str()
        .is_some_and(|w| w.contains("billing-2")));
    assert!(lock_row(&rows, "reports/daily").is_some(), "{rows}");
    let ledger = browser
        .wait_for("ledger held off", LOCK_ROWS, |rows| {
            lock_row(rows, "ledger").is_some_and(|r| r["held_off"] == json!(true))
        })
        .await;
    let ledger = lock_row(&ledger, "ledger").expect("row");
    assert!(
        ledger["holder"]
            .as_str()
            .is_some_and(|h| h.contains("held off") && h.contains("1 min")),
        "{ledger}"
    );
    let shared = browser
        .wait_for(
            "the read-write lock and the semaphore",
            SHARED_ROWS,
            |rows| rows.as_array().is_some_and(|r| r.len() == 2),
        )
        .await;
    assert_eq!(shared[0]["name"], "config/routes", "{shared}");
    assert_eq!(shared[0]["kind"], "read-write lock", "{shared}");
    let readers = shared[0]["holders"].as_array().expect("holders");
    assert_eq!(readers.len(), 2, "{shared}");
    assert!(
        readers
            .iter()
            .all(|h| h.as_str().is_some_and(|h| h.contains("(read)"))),
        "{shared}"
    );
    assert_eq!(shared[1]["name"], "exports", "{shared}");
    assert_eq!(shared[1]["kind"], "semaphore", "{shared}");
    assert_eq!(shared[1]["permits"], "3", "{shared}");
    assert!(
        shared[1]["holders"][0]
            .as_str()
            .is_some_and(|h| h.contains("cron-nightly")),
        "{shared}"
    );
    let sessions = browser
        .wait_for("the sessions", SESSION_ROWS, |s| s["billing-2"].is_array())
        .await;
    assert_eq!(
        sessions["billing-2"],
        json!(["—", "orders/42"]),
        "{sessions}"
    );
    assert_eq!(
        sessions["worker-7"],
        json!(["orders/42, rwlock config/routes", "—"]),
        "{sessions}"
    );
    assert_eq!(
        sessions["cron-nightly"],
        json!(["election scheduler, reports/daily, semaphore exports", "—"]),
        "{sessions}"
    );
    assert_eq!(
        sessions["importer-eu"][0],
        json!("inventory/sku-1138, payments/settlement-2026-11, rwlock config/routes"),
        "{sessions}"
    );

    let (status, body) = cluster
        .post(
            leader,
            "/v1/locks/reports/daily/release",
            json!({"session_id": cron}),
        )
        .await;
    assert_eq!(status, 204, "release: {body}");
    browser
        .wait_for("reports/daily gone after its release", LOCK_ROWS, |rows| {
            lock_row(rows, "orders/42").is_some() && lock_row(rows, "reports/daily").is_none()
        })
        .await;

    let up = |states: &Value| (1..=3).all(|id| states[id.to_string()] == json!("up"));
    browser.wait_for("every member up", MEMBER_STATES, up).await;

    // Under the load, the grant rate rises and the latency percentiles
    // are known; waiters (billing-2) and sessions are the state's.
    let plots = browser
        .wait_for("the plots following the load", PLOTS, |p| {
            plotted(p, "plot-grants", "grants/s").is_some_and(|r| r > 0.0)
                && plotted(p, "plot-latency", "p50").is_some()
                && plotted(p, "plot-latency", "p99").is_some()
                && plotted(p, "plot-sessions", "sessions") == Some(5.0)
                && (1..=3).all(|id| plotted(p, "plot-lag", &format!("member {id}")).is_some())
                && ["plot-grants", "plot-latency"].iter().all(|f| {
                    p[f].as_object().is_some_and(|series| {
                        series
                            .values()
                            .all(|s| s["points"].as_u64().is_some_and(|n| n >= 2))
                    })
                })
        })
        .await;
    for (figure, series) in [
        ("plot-grants", "grants/s"),
        ("plot-latency", "p50"),
        ("plot-latency", "p99"),
        ("plot-waiters", "waiters"),
        ("plot-sessions", "sessions"),
        ("plot-lag", "member 1"),
        ("plot-lag", "member 2"),
        ("plot-lag", "member 3"),
    ] {
        let line = &plots[figure][series];
        assert!(
            line["drawn"] == json!(true) && line["points"].as_u64().is_some_and(|n| n >= 2),
            "{figure} {series} is not drawn: {plots}"
        );
    }
    let (p50, p99) = (
        plotted(&plots, "plot-latency", "p50").unwrap_or(f64::NAN),
        plotted(&plots, "plot-latency", "p99").unwrap_or(f64::NAN),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{plots}");
    assert!(
        plotted(&plots, "plot-waiters", "waiters").is_some_and(|w| w >= 1.0),
        "{plots}"
    );
    cluster.kill9(victim);
    browser
        // With the load running on a loaded machine, the survivors can read
        // "unhealthy" for a probe round right after the kill: wait for the
        // state the page must settle in, not the first snapshot.
        .wait_for(
            &format!("member {victim} down, the others up"),
            MEMBER_STATES,
            |states| {
                states[victim.to_string()] == json!("down")
                    && states[serving.to_string()] == json!("up")
                    && states[leader.to_string()] == json!("up")
            },
        )
        .await;
    // The dead member's lag is unknown: its line stops.
    let victim_series = format!("member {victim}");
    browser
        .wait_for("the dead member's lag unknown", PLOTS, |p| {
            p["plot-lag"][&victim_series]["last"].is_null()
                && plotted(p, "plot-lag", &format!("member {leader}")) == Some(0.0)
        })
        .await;

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui.png");
    browser.screenshot(&shot).await;
    if let Ok(target) = std::env::var("RAFTLOCK_UI_SCREENSHOT") {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        std::fs::copy(&shot, repo.join(target)).expect("copy the screenshot");
    }

    // The load stops: the grant rate falls back to 0.
    stop_load.store(true, std::sync::atomic::Ordering::Relaxed);
    let granted = load.await.expect("the load task");
    assert!(granted > 0, "the load got no grant");
    browser
        .wait_for("the grant rate back to 0", PLOTS, |p| {
            plotted(p, "plot-grants", "grants/s") == Some(0.0)
        })
        .await;

    // The search by prefix narrows locks and sessions alike.
    browser.type_into("#prefix", "inventory/").await;
    browser
        .wait_for("only inventory/ locks", LOCK_ROWS, |rows| {
            rows.as_array()
                .is_some_and(|r| r.len() == 1 && r[0]["lock"] == json!("inventory/sku-1138"))
        })
        .await;
    browser
        .wait_for("only importer-eu's session", SESSION_ROWS, |s| {
            s.as_object()
                .is_some_and(|o| o.len() == 1 && o.contains_key("importer-eu"))
        })
        .await;

    // The leader dies too: no quorum. The page says there is no leader and
    // keeps showing this member's replica (stale reads), not a blank page.
    cluster.kill9(leader);
    browser
        .wait_for("no leader", STATUS, |s| {
            s["state"] == json!("stale")
                && s["banner"]
                    .as_str()
                    .is_some_and(|b| b.contains("no leader") && b.contains("replica"))
        })
        .await;
    let rows = browser.run(LOCK_ROWS).await;
    assert!(lock_row(&rows, "inventory/sku-1138").is_some(), "{rows}");

    // The member serving the page dies: the page says so and keeps the
    // last data, instead of waiting forever.
    cluster.kill9(serving);
    browser
        .wait_for("the serving member not answering", STATUS, |s| {
            s["state"] == json!("error")
                && s["banner"]
                    .as_str()
                    .is_some_and(|b| b.contains("does not answer"))
        })
        .await;
    let rows = browser.run(LOCK_ROWS).await;
    assert!(lock_row(&rows, "inventory/sku-1138").is_some(), "{rows}");
    waiting.abort();
}

/// `raftlock token new NAME --allow GRANT`: (secret, config block).
fn new_token(dir: &Path, name: &str, grant: &str) -> (String, String) {
    let file = dir.join(format!("{name}.token"));
    let output = Command::new(support::RAFTLOCK)
        .args(["token", "new", name, "--allow", grant, "--out"])
        .arg(&file)
        .output()
        .expect("raftlock token new");
    assert!(output.status.success(), "{output:?}");
    let secret = std::fs::read_to_string(&file).expect("token file");
    let block = String::from_utf8(output.stdout).expect("utf-8");
    (secret.trim().to_string(), block)
}

/// The status pill and the banner's text.
const STATUS: &str = r#"
const banner = document.getElementById('banner');
return {
  state: document.getElementById('status').dataset.state,
  banner: banner.hidden ? '' : banner.textContent,
};"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_asks_for_a_token_and_shows_what_it_may_read() {
    let browser = Browser::start().await;
    let mut cluster = ProcessCluster::configure(1);
    let dir = cluster.dir.path().to_path_buf();
    let (ops, ops_block) = new_token(&dir, "ops", "=admin");
    let (jobs, jobs_block) = new_token(&dir, "jobs", "jobs/=read,lock");
    let text = std::fs::read_to_string(&cluster.config).expect("config");
    std::fs::write(
        &cluster.config,
        format!("{text}\n{ops_block}\n{jobs_block}"),
    )
    .expect("write config");
    cluster.use_token(&ops);
    cluster.start_member(1);
    cluster.leader(&[1]).await;
    let session = cluster.open_session(1, "nightly", 120_000).await;
    let token = acquire(&cluster, 1, "jobs/nightly", &session).await;
    acquire(&cluster, 1, "secret/payroll", &session).await;

    // The page itself is public; its reads need a token.
    browser.open(&cluster.url(1, "/ui/")).await;
    browser
        .wait_for("the token prompt", STATUS, |s| {
            s["state"] == json!("auth")
                && s["banner"]
                    .as_str()
                    .is_some_and(|b| b.contains("requires a bearer token"))
        })
        .await;

    browser
        .run("sessionStorage.setItem('raftlock.token', 'not-a-token'); return null;")
        .await;
    browser
        .wait_for("the refused token", STATUS, |s| {
            s["banner"]
                .as_str()
                .is_some_and(|b| b.contains("token was refused") && b.contains("401"))
        })
        .await;

    let use_jobs = format!("sessionStorage.setItem('raftlock.token', {jobs:?}); return null;");
    browser.run(&use_jobs).await;
    browser
        .wait_for("live data", STATUS, |s| s["state"] == json!("live"))
        .await;
    let rows = browser
        .wait_for("jobs/nightly", LOCK_ROWS, |rows| {
            lock_row(rows, "jobs/nightly").is_some_and(|r| r["fencing"] == json!(token.to_string()))
        })
        .await;
    // The listing holds only names the token may read.
    assert!(lock_row(&rows, "secret/payroll").is_none(), "{rows}");
}

/// With `[tls]` (client certificates required) the members serve HTTPS;
/// the probes behind the page's member states speak TLS as a member does,
/// so health and applied index stay known (no browser needed here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reachability_probes_tls_members() {
    let mut cluster = ProcessCluster::configure(3);
    cluster.enable_tls("required");
    for id in 1..=3 {
        cluster.start_member(id);
    }
    let leader = cluster.leader(&[1, 2, 3]).await;
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let victim = (1..=3)
        .find(|id| *id != leader && *id != follower)
        .expect("another follower");
    let (status, body) = cluster.get(follower, "/v1/cluster/reachability").await;
    assert_eq!(status, 200, "{body}");
    for member in body["members"].as_array().expect("members") {
        assert_eq!(member["reachable"], json!(true), "{body}");
        assert_eq!(member["healthy"], json!(true), "{body}");
        assert!(member["applied_index"].as_u64().is_some(), "{body}");
    }
    cluster.kill9(victim);
    let (status, body) = cluster.get(follower, "/v1/cluster/reachability").await;
    assert_eq!(status, 200, "{body}");
    let dead = body["members"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["id"] == json!(victim)))
        .cloned()
        .unwrap_or_default();
    assert_eq!(dead["reachable"], json!(false), "{body}");
}
