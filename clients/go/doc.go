// Package raftlock is a client for raftlock, a Raft-replicated lock
// service, over its HTTP/JSON API (docs/api.md in the repository).
//
// A Client talks to any members of a cluster, with failover. On it:
//
//   - Session: a lease with a TTL, kept alive by a background goroutine;
//     Done is closed when the session is, or may be, lost, before the
//     cluster can have expired it.
//   - Mutex: a FIFO lock held through a session, with a fencing token.
//   - Election: leader election with observable leader and value.
//   - The primitives, one method per API route (sessions, locks,
//     elections, the generic node tree, cluster status).
//
// Errors from the cluster are *Error values; compare them with the
// sentinels (errors.Is(err, ErrLockHeld)).
package raftlock
