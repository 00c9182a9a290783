package raftlock

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// The API routes of read-write locks, semaphores and multi-locks
// (docs/api.md), one method per route like api.go's. RWLock, Semaphore
// and MultiLock build waits of any length, and cleanup, on them.

// Mode is what a read-write lock is taken for.
type Mode string

const (
	// Read shares the lock with the other readers at the head of its queue.
	Read Mode = "read"
	// Write holds it alone.
	Write Mode = "write"
)

// SharedHolder is a holder of a read-write lock or semaphore (SessionID
// and Principal as for Holder). Mode is empty for a semaphore.
type SharedHolder struct {
	SessionID     string `json:"session_id"`
	Owner         string `json:"owner"`
	Principal     string `json:"principal"`
	Node          string `json:"node"`
	Mode          Mode   `json:"mode"`
	FencingToken  uint64 `json:"fencing_token"`
	SinceRevision uint64 `json:"since_revision"`
}

// SharedWaiter is a session queued behind a read-write lock's or
// semaphore's holders.
type SharedWaiter struct {
	SessionID string `json:"session_id"`
	Owner     string `json:"owner"`
	Principal string `json:"principal"`
	Node      string `json:"node"`
	Mode      Mode   `json:"mode"`
}

// RWLockState is a read-write lock's holders and waiters, in queue order.
type RWLockState struct {
	Name    string         `json:"rwlock"`
	Holders []SharedHolder `json:"holders"`
	Waiters []SharedWaiter `json:"waiters"`
}

// SemaphoreState is a semaphore's limit (0 while nobody is queued), its
// holders and its waiters, in queue order.
type SemaphoreState struct {
	Name    string         `json:"semaphore"`
	Permits uint64         `json:"permits"`
	Holders []SharedHolder `json:"holders"`
	Waiters []SharedWaiter `json:"waiters"`
}

// RWLockSummary is one line of RWLocks.
type RWLockSummary struct {
	Name    string         `json:"rwlock"`
	Holders []SharedHolder `json:"holders"`
	Waiters int            `json:"waiters"`
}

// SemaphoreSummary is one line of Semaphores.
type SemaphoreSummary struct {
	Name    string         `json:"semaphore"`
	Permits uint64         `json:"permits"`
	Holders []SharedHolder `json:"holders"`
	Waiters int            `json:"waiters"`
}

type rwAcquireBody struct {
	SessionID  string `json:"session_id"`
	Mode       Mode   `json:"mode"`
	WaitMS     uint64 `json:"wait_ms"`
	KeepQueued bool   `json:"keep_queued,omitempty"`
}

type semaphoreAcquireBody struct {
	SessionID  string `json:"session_id"`
	Permits    uint64 `json:"permits"`
	WaitMS     uint64 `json:"wait_ms"`
	KeepQueued bool   `json:"keep_queued,omitempty"`
}

type multiBody struct {
	SessionID  string   `json:"session_id"`
	Locks      []string `json:"locks"`
	WaitMS     uint64   `json:"wait_ms"`
	KeepQueued bool     `json:"keep_queued,omitempty"`
}

type multiReleaseBody struct {
	SessionID string   `json:"session_id"`
	Locks     []string `json:"locks"`
}

// sharedGrant is a read-write lock's or semaphore's grant as the API
// answers it (the name under "rwlock" or "semaphore").
type sharedGrant struct {
	RWLock        string `json:"rwlock"`
	Semaphore     string `json:"semaphore"`
	Node          string `json:"node"`
	FencingToken  uint64 `json:"fencing_token"`
	SessionID     string `json:"session_id"`
	SinceRevision uint64 `json:"since_revision"`
}

func (g sharedGrant) grant() *Grant {
	name := g.RWLock
	if name == "" {
		name = g.Semaphore
	}
	return &Grant{Name: name, Node: g.Node, FencingToken: g.FencingToken, SessionID: g.SessionID, SinceRevision: g.SinceRevision}
}

// acquireShared posts one acquire to /v1/{route}/{name}/acquire.
func (c *Client) acquireShared(ctx context.Context, route, name string, body interface{}, opts AcquireOptions) (*Grant, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	_, out, err := c.do(ctx, call{
		method: http.MethodPost,
		path:   "/v1/" + route + "/" + name + "/acquire",
		body:   body,
		wait:   opts.Wait,
	})
	if err != nil {
		return nil, err
	}
	var g sharedGrant
	if err := decode(out, &g); err != nil {
		return nil, err
	}
	return g.grant(), nil
}

// releaseShared deletes session's entry in /v1/{route}/{name}.
func (c *Client) releaseShared(ctx context.Context, route, name, session string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, _, err := c.do(ctx, call{
		method:     http.MethodPost,
		path:       "/v1/" + route + "/" + name + "/release",
		body:       sessionOnly{session},
		goneIsDone: true,
	})
	return err
}

// get decodes a GET answer into v.
func (c *Client) get(ctx context.Context, path string, v interface{}) error {
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: path})
	if err != nil {
		return err
	}
	return decode(out, v)
}

// listPath is a listing route with its prefix.
func listPath(route, prefix string) string {
	if prefix == "" {
		return route
	}
	return route + "?prefix=" + url.QueryEscape(prefix)
}

// AcquireRWLock queues session on read-write lock name for mode and
// waits up to opts.Wait for the grant (one request, retried on failover).
func (c *Client) AcquireRWLock(ctx context.Context, name, session string, mode Mode, opts AcquireOptions) (*Grant, error) {
	body := rwAcquireBody{SessionID: session, Mode: mode, WaitMS: millis(opts.Wait), KeepQueued: opts.KeepQueued}
	return c.acquireShared(ctx, "rwlocks", name, body, opts)
}

// ReleaseRWLock deletes session's entry in read-write lock name: a
// release when it holds, a cancel when it waits.
func (c *Client) ReleaseRWLock(ctx context.Context, name, session string) error {
	return c.releaseShared(ctx, "rwlocks", name, session)
}

// RWLockState returns the read-write lock's holders and waiters (a
// linearizable read).
func (c *Client) RWLockState(ctx context.Context, name string) (*RWLockState, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	var st RWLockState
	if err := c.get(ctx, "/v1/rwlocks/"+name, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// RWLocks lists the read-write locks whose names start with prefix (""
// for all) that have holders or waiters.
func (c *Client) RWLocks(ctx context.Context, prefix string) ([]RWLockSummary, error) {
	var list struct {
		RWLocks []RWLockSummary `json:"rwlocks"`
	}
	if err := c.get(ctx, listPath("/v1/rwlocks", prefix), &list); err != nil {
		return nil, err
	}
	return list.RWLocks, nil
}

// AcquireSemaphore queues session for one of semaphore name's permits
// places (every holder must name the same number: ErrLimitMismatch
// otherwise) and waits up to opts.Wait for the grant.
func (c *Client) AcquireSemaphore(ctx context.Context, name, session string, permits uint64, opts AcquireOptions) (*Grant, error) {
	body := semaphoreAcquireBody{SessionID: session, Permits: permits, WaitMS: millis(opts.Wait), KeepQueued: opts.KeepQueued}
	return c.acquireShared(ctx, "semaphores", name, body, opts)
}

// ReleaseSemaphore gives back session's place in semaphore name (or
// cancels its wait).
func (c *Client) ReleaseSemaphore(ctx context.Context, name, session string) error {
	return c.releaseShared(ctx, "semaphores", name, session)
}

// SemaphoreState returns the semaphore's limit, holders and waiters (a
// linearizable read).
func (c *Client) SemaphoreState(ctx context.Context, name string) (*SemaphoreState, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	var st SemaphoreState
	if err := c.get(ctx, "/v1/semaphores/"+name, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Semaphores lists the semaphores whose names start with prefix (""
// for all) that have holders or waiters.
func (c *Client) Semaphores(ctx context.Context, prefix string) ([]SemaphoreSummary, error) {
	var list struct {
		Semaphores []SemaphoreSummary `json:"semaphores"`
	}
	if err := c.get(ctx, listPath("/v1/semaphores", prefix), &list); err != nil {
		return nil, err
	}
	return list.Semaphores, nil
}

func checkNames(locks []string) error {
	if len(locks) == 0 {
		return apiError(CodeBadRequest, "a multi-lock names at least one lock")
	}
	for _, name := range locks {
		if err := checkName(name); err != nil {
			return err
		}
	}
	return nil
}

// AcquireMulti queues session in every lock of locks as one entry and
// waits up to opts.Wait until it holds them all: one grant per lock, in
// the order named. The locks are the ordinary locks of Acquire.
func (c *Client) AcquireMulti(ctx context.Context, locks []string, session string, opts AcquireOptions) ([]Grant, error) {
	if err := checkNames(locks); err != nil {
		return nil, err
	}
	_, out, err := c.do(ctx, call{
		method: http.MethodPost,
		path:   "/v1/multilocks/acquire",
		body:   multiBody{SessionID: session, Locks: locks, WaitMS: millis(opts.Wait), KeepQueued: opts.KeepQueued},
		wait:   opts.Wait,
	})
	if err != nil {
		return nil, err
	}
	var answer struct {
		SessionID string  `json:"session_id"`
		Locks     []Grant `json:"locks"`
	}
	if err := decode(out, &answer); err != nil {
		return nil, err
	}
	for i := range answer.Locks {
		answer.Locks[i].SessionID = answer.SessionID
	}
	return answer.Locks, nil
}

// ReleaseMulti releases (or cancels) session's entries in every lock of
// locks, together.
func (c *Client) ReleaseMulti(ctx context.Context, locks []string, session string) error {
	if err := checkNames(locks); err != nil {
		return err
	}
	_, _, err := c.do(ctx, call{
		method:     http.MethodPost,
		path:       "/v1/multilocks/release",
		body:       multiReleaseBody{SessionID: session, Locks: locks},
		goneIsDone: true,
	})
	return err
}

// joinNames labels a multi-lock in errors.
func joinNames(locks []string) string { return strings.Join(locks, ",") }
