// The raftlock dashboard (served at /ui by every member; docs/api.md,
// "Dashboard"). Plain browser JavaScript, no build step.
//
// Live updates by polling: one round of reads per second, the next round
// only after the previous one finished. The API's push channels do not fit
// a whole-cluster view (the only event stream is one election's `observe`;
// long-polls are lock acquisitions, i.e. writes), and a one-second poll of a
// few cheap reads shows a change within about a second. Every request has
// a deadline, so a member that stops answering turns the page "stale" or
// "down" within a few seconds instead of leaving it waiting.
"use strict";

const POLL_MS = 1000;
const REQUEST_TIMEOUT_MS = 3000;
const MAX_DETAIL_READS = 100; // lock queues read per round
const TOKEN_KEY = "raftlock.token";

const $ = (id) => document.getElementById(id);

// Builds an element; strings become text nodes (names and owners come from
// clients: never parsed as HTML).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function fill(tableId, rows, columns, emptyText) {
  const body = $(tableId).querySelector("tbody");
  body.replaceChildren(
    ...(rows.length
      ? rows
      : [el("tr", {}, el("td", { class: "empty", colSpan: columns }, emptyText))])
  );
}

const shortId = (id) => (id ? id.slice(0, 8) + "…" : "—");
const who = (h) => (h.owner ? h.owner : "(no owner)");
const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });
function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  return Math.floor(s / 3600) + " h ago";
}
function duration(ms) {
  if (ms % 3600000 === 0) return ms / 3600000 + " h";
  if (ms % 60000 === 0) return ms / 60000 + " min";
  if (ms % 1000 === 0) return ms / 1000 + " s";
  return ms + " ms";
}

// ---- the API -------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, as = "json") {
  const headers = { Accept: as === "json" ? "application/json" : "text/plain" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
  let response;
  try {
    response = await fetch(path, { headers, signal: abort.signal, cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "unreachable",
      abort.signal.aborted ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : "connection failed");
  } finally {
    clearTimeout(timer);
  }
  if (as === "text" && response.ok) return response.text();
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, body && body.error ? body.error : "http_" + response.status,
      body && body.message ? body.message : response.statusText);
  }
  return body;
}

// ---- state kept across rounds ---------------------------------------------

const firstSeen = new Map(); // "lock\0node" -> ms when this page first saw that grant
// Without a leader, linearizable reads cannot answer: the listings then
// read this member's replica (`consistency=stale`) and the page says so.
let leaderless = false;
let lastSuccess = 0;
let lastFailure = null;
let round = 0;

function heldSince(lock, holder, now) {
  const key = lock + "\u0000" + holder.node;
  if (!firstSeen.has(key)) firstSeen.set(key, now);
  return firstSeen.get(key);
}

// ---- one round -------------------------------------------------------------

async function refresh() {
  const prefix = $("prefix").value.trim();
  const params = new URLSearchParams();
  if (prefix) params.set("prefix", prefix);
  if (leaderless) params.set("consistency", "stale");
  const query = params.toString() ? "?" + params.toString() : "";
  const stale = leaderless ? "?consistency=stale" : "";
  const [cluster, reach, locks, elections, sessions, rwlocks, semaphores, metrics] = await Promise.allSettled([
    api("/v1/cluster"),
    api("/v1/cluster/reachability"),
    api("/v1/locks" + query),
    api("/v1/elections" + query),
    api("/v1/sessions" + stale),
    api("/v1/rwlocks" + query),
    api("/v1/semaphores" + query),
    // The plots' counters (plots.js): public, this member's own.
    api("/metrics", "text"),
  ]);
  const failures = [cluster, reach, locks, elections, sessions, rwlocks, semaphores]
    .filter((r) => r.status === "rejected");
  let lag = new Map();
  if (cluster.status === "fulfilled") {
    leaderless = cluster.value.leader_id === null;
    lag = renderCluster(cluster.value, reach.status === "fulfilled" ? reach.value : null);
  } else {
    renderClusterUnknown(cluster.reason);
  }
  const now = Date.now();
  Plots.record(metrics.status === "fulfilled" ? metrics.value : null, lag, now);
  Plots.render(now);
  let details = new Map();
  if (locks.status === "fulfilled") {
    details = await lockQueues(locks.value.locks, stale);
    renderLocks(locks.value.locks, details);
  }
  if (elections.status === "fulfilled") renderElections(elections.value.elections);
  let shared = null;
  if (rwlocks.status === "fulfilled" && semaphores.status === "fulfilled") {
    shared = sharedLines(rwlocks.value.rwlocks, semaphores.value.semaphores);
    renderShared(shared);
  }
  if ([locks, elections, sessions].every((r) => r.status === "fulfilled") && shared) {
    renderSessions(sessions.value, locks.value.locks, elections.value.elections, shared, prefix);
  }
  $("search-summary").textContent = prefix ? `showing names that start with “${prefix}”` : "showing every name";
  // /v1/cluster is a local read: when it fails to connect or times out,
  // the member itself is not answering (other reads may only be waiting
  // for a leader).
  const memberDown = cluster.status === "rejected" && cluster.reason.status === 0;
  report(failures.map((r) => r.reason), memberDown);
}

// Waiters in queue order need the lock's own read; only locks with waiters.
async function lockQueues(locks, stale) {
  const waiting = locks.filter((l) => l.waiters > 0).slice(0, MAX_DETAIL_READS);
  const answers = await Promise.allSettled(
    waiting.map((l) => api("/v1/locks/" + l.lock.split("/").map(encodeURIComponent).join("/") + stale))
  );
  const out = new Map();
  answers.forEach((a, i) => {
    if (a.status === "fulfilled") out.set(waiting[i].lock, a.value);
  });
  return out;
}

// Fills the members table; returns each member's lag (null where not
// known or down) for the lag plot.
function renderCluster(cluster, reach) {
  $("served-by").textContent = `served by member ${cluster.node_id}`;
  const probes = new Map((reach ? reach.members : []).map((p) => [p.id, p]));
  // Raft tells a leader every member's applied index and a follower only
  // its own; the probes' health answers fill in the rest.
  const applied = (m) => {
    if (m.applied_index !== null && m.applied_index !== undefined) return m.applied_index;
    const probe = probes.get(m.id);
    return probe && probe.applied_index !== null && probe.applied_index !== undefined ? probe.applied_index : null;
  };
  const leader = cluster.members.find((m) => m.id === cluster.leader_id);
  const leaderApplied = leader ? applied(leader) : null;
  $("cluster-summary").textContent =
    `term ${cluster.term} · ` +
    (cluster.leader_id === null ? "NO LEADER" : `leader: member ${cluster.leader_id}`) +
    ` · ${cluster.members.length} members`;
  const lags = new Map();
  const rows = cluster.members.map((m) => {
    const probe = probes.get(m.id);
    let state = "unknown";
    let stateTitle = "reachability not known (the probe request failed)";
    if (probe) {
      if (!probe.reachable) {
        state = "down";
        stateTitle = `member ${cluster.node_id} cannot reach it: ${probe.error}`;
      } else if (probe.healthy === false) {
        state = "unhealthy";
        stateTitle = "answers, but has no leader or is not caught up (/v1/health)";
      } else {
        state = "up";
        stateTitle = "answers /v1/health";
      }
    }
    const lag =
      leaderApplied !== null && applied(m) !== null && state !== "down"
        ? Math.max(0, leaderApplied - applied(m))
        : null;
    lags.set(m.id, lag);
    return el("tr", { "data-member-id": m.id, "data-state": state },
      el("td", { class: "mono" }, m.id + (m.id === cluster.node_id ? " (this page)" : "")),
      el("td", {}, el("span", { class: "pill member-state", "data-state": state, title: stateTitle }, state)),
      el("td", { class: "role role-" + m.role }, m.role),
      el("td", { class: "mono" }, m.api_addr),
      el("td", { class: "num" }, applied(m) === null ? "—" : applied(m)),
      el("td", { class: "num", title: "leader's applied index minus this member's" }, lag === null ? "—" : lag),
      el("td", { class: "num" }, probe && probe.rtt_ms !== null ? probe.rtt_ms + " ms" : "—"));
  });
  fill("members", rows, 7, "no members");
  return lags;
}

function renderClusterUnknown(error) {
  // Keep the last table but say it is old: nothing spins.
  for (const row of $("members").querySelectorAll("tbody tr[data-member-id]")) {
    row.setAttribute("data-state", "unknown");
    const pill = row.querySelector(".member-state");
    if (pill) {
      pill.setAttribute("data-state", "stale");
      pill.textContent = "unknown";
      pill.title = "this member did not answer: " + error.message;
    }
  }
}

function renderLocks(locks, details) {
  const now = Date.now();
  $("locks-count").textContent = `(${locks.length})`;
  const rows = locks.map((l) => {
    const h = l.holder;
    const detail = details.get(l.lock);
    let waiters;
    if (l.waiters === 0) waiters = el("span", { class: "muted" }, "none");
    else if (detail)
      waiters = el("ol", { class: "waiters" },
        detail.waiters.map((w) =>
          el("li", { title: w.session_id ? "session " + w.session_id : "another principal's session" },
            who(w), w.principal ? el("span", { class: "muted" }, ` (${w.principal})`) : null)));
    else waiters = `${l.waiters} waiting`;
    const since = h ? heldSince(l.lock, h, now) : null;
    // A lost holder's lock-delay runs: nobody holds it, nobody is granted it.
    const free = l.held_off
      ? el("span", { class: "held-off", title: "the holder's session ended; the next in line waits for the lock-delay" },
        `held off (lock-delay ${duration(l.lock_delay_ms)})`)
      : el("span", { class: "muted" }, "free");
    return el("tr", { "data-lock": l.lock, "data-held": h ? "true" : "false", "data-held-off": l.held_off ? "true" : "false" },
      el("td", { class: "mono lock-name" }, l.lock),
      el("td", { class: "holder" }, h ? who(h) : free,
        h && h.principal ? el("span", { class: "muted" }, ` (${h.principal})`) : null),
      el("td", { class: "mono", title: h && h.session_id ? h.session_id : "" }, h ? shortId(h.session_id) : ""),
      el("td", { class: "num fencing" }, h ? h.fencing_token : ""),
      el("td", { class: "since", title: "revision of the grant; time first seen by this page" },
        h ? `rev ${h.since_revision} · ${clock(since)} (${ago(since)})` : ""),
      el("td", { class: "waiters-cell" }, waiters));
  });
  fill("locks", rows, 6, "no locks" + ($("prefix").value.trim() ? " under this prefix" : ""));
}

function renderElections(elections) {
  $("elections-count").textContent = `(${elections.length})`;
  const rows = elections.map((e) => {
    const l = e.leader;
    return el("tr", { "data-election": e.election },
      el("td", { class: "mono" }, e.election),
      el("td", { class: "mono leader-value" }, l ? l.value : el("span", { class: "muted" }, "no leader")),
      el("td", {}, l && l.principal ? l.principal : "—"),
      el("td", { class: "num" }, l ? l.fencing_token : ""),
      el("td", { class: "num" }, e.candidates));
  });
  fill("elections", rows, 5, "no elections");
}

// Read-write locks and semaphores in one table: both are queues whose
// first entries hold together.
function sharedLines(rwlocks, semaphores) {
  const lines = [
    ...rwlocks.map((r) => ({ name: r.rwlock, kind: "read-write lock", permits: null, holders: r.holders, waiters: r.waiters })),
    ...semaphores.map((s) => ({ name: s.semaphore, kind: "semaphore", permits: s.permits, holders: s.holders, waiters: s.waiters })),
  ];
  return lines.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.kind < b.kind ? -1 : 1));
}

function renderShared(lines) {
  $("shared-count").textContent = `(${lines.length})`;
  const rows = lines.map((line) =>
    el("tr", { "data-shared": line.name, "data-kind": line.kind },
      el("td", { class: "mono" }, line.name),
      el("td", {}, line.kind),
      el("td", { class: "shared-holders" },
        line.holders.length === 0
          ? el("span", { class: "muted" }, "none")
          : el("ul", { class: "waiters" },
            line.holders.map((h) =>
              el("li", { title: h.session_id ? "session " + h.session_id : "another principal's session" },
                who(h), h.mode ? ` (${h.mode})` : "", el("span", { class: "muted mono" }, ` #${h.fencing_token}`))))),
      el("td", { class: "num" }, line.permits === null ? "" : line.permits),
      el("td", { class: "num" }, line.waiters)));
  fill("shared", rows, 5, "no read-write locks or semaphores" + ($("prefix").value.trim() ? " under this prefix" : ""));
}

// Sessions from GET /v1/sessions; each queue node of a session holds when
// it is among its queue's holders in the listings above, else it waits.
function queueOf(path) {
  for (const [root, label] of [
    ["/locks/", ""],
    ["/elections/", "election "],
    ["/rwlocks/", "rwlock "],
    ["/semaphores/", "semaphore "],
  ]) {
    if (path.startsWith(root)) {
      const rest = path.slice(root.length);
      const cut = rest.lastIndexOf("/");
      if (cut > 0) return { name: rest.slice(0, cut), label: label + rest.slice(0, cut) };
    }
  }
  return null;
}

function renderSessions(list, locks, elections, shared, prefix) {
  const holding = new Set();
  for (const l of locks) if (l.holder) holding.add(l.holder.node);
  for (const e of elections) if (e.leader) holding.add(e.leader.node);
  for (const line of shared) for (const h of line.holders) holding.add(h.node);
  const rows = [];
  for (const s of list.sessions) {
    const holds = [];
    const waits = [];
    const others = [];
    let matches = !prefix;
    for (const node of s.nodes) {
      const queue = queueOf(node);
      if (queue) {
        (holding.has(node) ? holds : waits).push(queue.label);
        matches = matches || queue.name.startsWith(prefix);
      } else {
        others.push(node);
        matches = matches || node.startsWith("/" + prefix);
      }
    }
    if (!matches) continue;
    rows.push(el("tr", { "data-session": s.session_id },
      el("td", { class: "mono", title: s.session_id }, shortId(s.session_id)),
      el("td", {}, who(s)),
      el("td", {}, s.principal || "—"),
      el("td", { class: "num" }, duration(s.ttl_ms)),
      el("td", { class: "mono session-holds" }, holds.join(", ") || "—"),
      el("td", { class: "mono session-waits" }, waits.join(", ") || "—"),
      el("td", { class: "mono", title: others.join("\n") }, others.length ? others.join(", ") : "—")));
  }
  $("sessions-count").textContent = `(${rows.length}${list.truncated ? "+, list truncated" : ""})`;
  fill("sessions", rows, 7, prefix ? "no session has a node under this prefix" : "no sessions");
}

// ---- status line and banner -------------------------------------------------

function report(errors, memberDown) {
  const now = Date.now();
  const status = $("status");
  const banner = $("banner");
  const auth = errors.find((e) => e.status === 401 || e.status === 403);
  if (errors.length === 0 && leaderless) {
    lastSuccess = now;
    lastFailure = null;
    status.setAttribute("data-state", "stale");
    status.textContent = "no leader";
    document.body.classList.remove("stale");
    banner.hidden = false;
    banner.setAttribute("data-kind", "error");
    banner.textContent = "The cluster has no leader: writes fail with no_leader. Locks and sessions below are " +
      "this member's replica as last applied (stale reads); they may be behind the cluster.";
  } else if (errors.length === 0) {
    lastSuccess = now;
    lastFailure = null;
    status.setAttribute("data-state", "live");
    status.textContent = "live";
    document.body.classList.remove("stale");
    banner.hidden = true;
  } else {
    if (!lastFailure) lastFailure = now;
    const down = memberDown;
    status.setAttribute("data-state", auth ? "auth" : down ? "error" : "stale");
    status.textContent = auth ? "token needed" : down ? "member not answering" : "partly stale";
    document.body.classList.toggle("stale", down || !!auth);
    banner.hidden = false;
    banner.setAttribute("data-kind", auth ? "warn" : "error");
    if (auth && auth.status === 401) {
      banner.textContent = sessionStorage.getItem(TOKEN_KEY)
        ? `The token was refused (401 ${auth.code}: ${auth.message}). Paste a valid token above.`
        : "This cluster requires a bearer token. Paste one above: it stays in this browser tab (sessionStorage) and is sent as Authorization: Bearer.";
    } else if (auth) {
      banner.textContent = `Your token may not read this (403 ${auth.code}: ${auth.message}).`;
    } else if (down) {
      banner.textContent = `The member serving this page does not answer (${errors[0].message}) since ${clock(lastFailure)}. ` +
        "Data below is from " + (lastSuccess ? clock(lastSuccess) : "never") + "; open /ui on another member.";
    } else {
      const first = errors[0];
      banner.textContent = `Some reads failed: ${first.status || ""} ${first.code}: ${first.message}` +
        (first.code === "no_leader" ? " (the cluster has no leader: linearizable reads wait for one)" : "");
    }
  }
  $("updated").textContent = lastSuccess ? "updated " + clock(lastSuccess) : "";
}

// ---- wiring -----------------------------------------------------------------

async function loop() {
  const started = Date.now();
  try {
    await refresh();
  } catch (e) {
    report([e instanceof ApiError ? e : new ApiError(0, "error", String(e))], false);
  }
  round += 1;
  document.body.setAttribute("data-round", round);
  setTimeout(loop, Math.max(0, POLL_MS - (Date.now() - started)));
}

function start() {
  const params = new URLSearchParams(location.hash.slice(1));
  $("prefix").value = params.get("prefix") || "";
  $("prefix").addEventListener("input", () => {
    const p = $("prefix").value.trim();
    history.replaceState(null, "", p ? "#prefix=" + encodeURIComponent(p) : "#");
  });
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    $("token").value = "";
    $("token").placeholder = token ? "token set for this tab" : $("token").placeholder;
  });
  $("token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("token").placeholder = "paste a token (this tab only)";
  });
  if (sessionStorage.getItem(TOKEN_KEY)) $("token").placeholder = "token set for this tab";
  loop();
}

document.addEventListener("DOMContentLoaded", start);
