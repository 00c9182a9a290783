package raftlock

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// This file holds the primitives: one method per API route. Session,
// Mutex and Election are built on them; use them directly for anything
// the recipes do not cover.

// Grant is a granted lock or a won election.
type Grant struct {
	// Name is the lock's (or election's) name.
	Name string `json:"lock"`
	// Node is the full tree path of the session's queue node
	// (/locks/orders/42/lock-0000000007).
	Node string `json:"node"`
	// FencingToken is the node's create revision: strictly greater than
	// every token granted before it, on any lock. Pass it to the storage
	// you protect.
	FencingToken uint64 `json:"fencing_token"`
	// SessionID is the holding session.
	SessionID string `json:"session_id"`
	// SinceRevision is the revision at which the grant happened (locks
	// only; 0 for elections).
	SinceRevision uint64 `json:"since_revision"`
}

// Holder is the holder of a lock. On a cluster with bearer tokens,
// SessionID is empty when the session belongs to another principal (only
// its own token and cluster admins see it), and Principal names the token
// that opened it.
type Holder struct {
	SessionID     string `json:"session_id"`
	Owner         string `json:"owner"`
	Principal     string `json:"principal"`
	Node          string `json:"node"`
	FencingToken  uint64 `json:"fencing_token"`
	SinceRevision uint64 `json:"since_revision"`
}

// Waiter is a session queued behind a lock's holder (SessionID and
// Principal as for Holder).
type Waiter struct {
	SessionID string `json:"session_id"`
	Owner     string `json:"owner"`
	Principal string `json:"principal"`
	Node      string `json:"node"`
}

// LockState is a lock's queue: its holder (nil when free) and its
// waiters in queue order.
type LockState struct {
	Name    string   `json:"lock"`
	Holder  *Holder  `json:"holder"`
	Waiters []Waiter `json:"waiters"`
	// LockDelayMS is the lock's lock-delay in milliseconds, 0 for none.
	LockDelayMS uint64 `json:"lock_delay_ms"`
	// HeldOff is true while the lock is held off: its holder's session
	// ended and nobody is granted it until the delay has passed (Holder
	// is then nil).
	HeldOff bool `json:"held_off"`
}

// LockSummary is one line of Locks.
type LockSummary struct {
	Name    string  `json:"lock"`
	Holder  *Holder `json:"holder"`
	Waiters int     `json:"waiters"`
	// LockDelayMS and HeldOff as in LockState.
	LockDelayMS uint64 `json:"lock_delay_ms"`
	HeldOff     bool   `json:"held_off"`
}

// FencingStatus answers FencingCheck.
type FencingStatus struct {
	// Valid is true when the token is the current holder's.
	Valid bool `json:"valid"`
	// CurrentToken is the current holder's token, 0 when the lock is
	// free (tokens start at 1).
	CurrentToken uint64 `json:"current_token"`
}

// Leader is an election's leader and its proclaimed value (SessionID and
// Principal as for Holder).
type Leader struct {
	SessionID string `json:"session_id"`
	Principal string `json:"principal"`
	// Value is what the leader campaigned with or last proclaimed.
	Value        string `json:"value"`
	Node         string `json:"node"`
	FencingToken uint64 `json:"fencing_token"`
}

// Member is one member of the cluster as GET /v1/cluster shows it.
type Member struct {
	ID       uint64 `json:"id"`
	APIAddr  string `json:"api_addr"`
	RaftAddr string `json:"raft_addr"`
	Role     string `json:"role"`
	// AppliedIndex is known for the answering member, and for the others
	// only when it leads.
	AppliedIndex *uint64 `json:"applied_index"`
}

// ClusterStatus is the cluster as one member sees it.
type ClusterStatus struct {
	// NodeID is the member that answered.
	NodeID uint64 `json:"node_id"`
	// LeaderID is the Raft leader, 0 when none is known.
	LeaderID uint64   `json:"leader_id"`
	Term     uint64   `json:"term"`
	Members  []Member `json:"members"`
}

// AcquireOptions are the knobs of one acquire request.
type AcquireOptions struct {
	// Wait is how long the server long-polls for the grant; 0 is a
	// try-lock. At most the server's maximum (default 5 min).
	Wait time.Duration
	// KeepQueued asks the server to keep the session's queued node when
	// Wait elapses (a timeout), so the next acquire of the session finds
	// it in the same place in the queue. Without it a timeout withdraws
	// the session's waiting node. Needs a server that knows the field.
	KeepQueued bool
	// LockDelay (locks only): after a holder's session expires or is
	// closed, nobody is granted the lock for this long; a release skips
	// it. The acquire that creates the lock's queue fixes it (at most
	// 60 s); another value is refused (ErrBadRequest) while anyone is
	// queued. 0 asks for none and takes the lock's own (docs/api.md).
	LockDelay time.Duration
}

type sessionOnly struct {
	SessionID string `json:"session_id"`
}

type acquireBody struct {
	SessionID  string `json:"session_id"`
	WaitMS     uint64 `json:"wait_ms"`
	KeepQueued bool   `json:"keep_queued,omitempty"`
	// Omitted when 0: an explicit 0 on a delayed lock would be refused.
	LockDelayMS uint64 `json:"lock_delay_ms,omitempty"`
}

type campaignBody struct {
	SessionID  string `json:"session_id"`
	Value      string `json:"value"`
	WaitMS     uint64 `json:"wait_ms"`
	KeepQueued bool   `json:"keep_queued,omitempty"`
}

// OpenSession opens a session with this TTL and owner label (free text
// shown in listings) and returns its id and the TTL granted. Most code
// wants NewSession, which also keeps it alive.
func (c *Client) OpenSession(ctx context.Context, owner string, ttl time.Duration) (id string, granted time.Duration, err error) {
	body := struct {
		TTLMS uint64 `json:"ttl_ms"`
		Owner string `json:"owner"`
	}{millis(ttl), owner}
	_, out, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sessions", body: body})
	if err != nil {
		return "", 0, err
	}
	var opened struct {
		SessionID string `json:"session_id"`
		TTLMS     uint64 `json:"ttl_ms"`
	}
	if err := decode(out, &opened); err != nil {
		return "", 0, err
	}
	return opened.SessionID, time.Duration(opened.TTLMS) * time.Millisecond, nil
}

// Keepalive restarts session id's TTL and returns it.
func (c *Client) Keepalive(ctx context.Context, id string) (time.Duration, error) {
	_, out, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sessions/" + url.PathEscape(id) + "/keepalive"})
	if err != nil {
		return 0, err
	}
	var ttl struct {
		TTLMS uint64 `json:"ttl_ms"`
	}
	if err := decode(out, &ttl); err != nil {
		return 0, err
	}
	return time.Duration(ttl.TTLMS) * time.Millisecond, nil
}

// CloseSession closes session id, releasing every lock and ephemeral
// node it owns.
func (c *Client) CloseSession(ctx context.Context, id string) error {
	_, _, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/sessions/" + url.PathEscape(id), goneIsDone: true})
	return err
}

// Acquire queues session on lock and waits up to opts.Wait for the
// grant. One request (retried on failover); Mutex builds waits of any
// length, and cleanup, on it.
func (c *Client) Acquire(ctx context.Context, lock, session string, opts AcquireOptions) (*Grant, error) {
	if err := checkName(lock); err != nil {
		return nil, err
	}
	_, out, err := c.do(ctx, call{
		method: http.MethodPost,
		path:   "/v1/locks/" + lock + "/acquire",
		body: acquireBody{
			SessionID: session, WaitMS: millis(opts.Wait), KeepQueued: opts.KeepQueued,
			LockDelayMS: millis(opts.LockDelay),
		},
		wait: opts.Wait,
	})
	if err != nil {
		return nil, err
	}
	var g Grant
	if err := decode(out, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// Release deletes session's node in lock: a release when it holds the
// lock, a cancel when it waits.
func (c *Client) Release(ctx context.Context, lock, session string) error {
	if err := checkName(lock); err != nil {
		return err
	}
	_, _, err := c.do(ctx, call{
		method:     http.MethodPost,
		path:       "/v1/locks/" + lock + "/release",
		body:       sessionOnly{session},
		goneIsDone: true,
	})
	return err
}

// LockState returns lock's holder and waiters (a linearizable read).
func (c *Client) LockState(ctx context.Context, lock string) (*LockState, error) {
	if err := checkName(lock); err != nil {
		return nil, err
	}
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/locks/" + lock})
	if err != nil {
		return nil, err
	}
	var st LockState
	if err := decode(out, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Locks lists the locks whose names start with prefix ("" for all).
func (c *Client) Locks(ctx context.Context, prefix string) ([]LockSummary, error) {
	path := "/v1/locks"
	if prefix != "" {
		path += "?prefix=" + url.QueryEscape(prefix)
	}
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: path})
	if err != nil {
		return nil, err
	}
	var list struct {
		Locks []LockSummary `json:"locks"`
	}
	if err := decode(out, &list); err != nil {
		return nil, err
	}
	return list.Locks, nil
}

// FencingCheck asks whether token is the current holder's of lock: what
// a storage service can ask before accepting a write.
func (c *Client) FencingCheck(ctx context.Context, lock string, token uint64) (FencingStatus, error) {
	if err := checkName(lock); err != nil {
		return FencingStatus{}, err
	}
	body := struct {
		Lock         string `json:"lock"`
		FencingToken uint64 `json:"fencing_token"`
	}{lock, token}
	_, out, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/fencing/check", body: body})
	if err != nil {
		return FencingStatus{}, err
	}
	var st FencingStatus
	err = decode(out, &st)
	return st, err
}

// Campaign queues session as a candidate of election with value and
// waits up to wait to be elected (0 tries once: ErrLockHeld when led).
// One request; Election builds waits of any length on it.
func (c *Client) Campaign(ctx context.Context, election, session, value string, wait time.Duration) (*Grant, error) {
	return c.campaign(ctx, election, session, value, wait, false)
}

func (c *Client) campaign(ctx context.Context, election, session, value string, wait time.Duration, keepQueued bool) (*Grant, error) {
	if err := checkName(election); err != nil {
		return nil, err
	}
	_, out, err := c.do(ctx, call{
		method: http.MethodPost,
		path:   "/v1/elections/" + election + "/campaign",
		body:   campaignBody{SessionID: session, Value: value, WaitMS: millis(wait), KeepQueued: keepQueued},
		wait:   wait,
	})
	if err != nil {
		return nil, err
	}
	var elected struct {
		Election     string `json:"election"`
		Node         string `json:"node"`
		FencingToken uint64 `json:"fencing_token"`
		SessionID    string `json:"session_id"`
	}
	if err := decode(out, &elected); err != nil {
		return nil, err
	}
	return &Grant{Name: election, Node: elected.Node, FencingToken: elected.FencingToken, SessionID: session}, nil
}

// Proclaim changes the value the leader of election shows; ErrNotLeader
// unless session leads.
func (c *Client) Proclaim(ctx context.Context, election, session, value string) error {
	if err := checkName(election); err != nil {
		return err
	}
	body := struct {
		SessionID string `json:"session_id"`
		Value     string `json:"value"`
	}{session, value}
	_, _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/elections/" + election + "/proclaim", body: body})
	return err
}

// Resign steps session down from election, or withdraws its candidacy.
func (c *Client) Resign(ctx context.Context, election, session string) error {
	if err := checkName(election); err != nil {
		return err
	}
	_, _, err := c.do(ctx, call{
		method:     http.MethodPost,
		path:       "/v1/elections/" + election + "/resign",
		body:       sessionOnly{session},
		goneIsDone: true,
	})
	return err
}

// Leader returns election's leader, nil when there is none.
func (c *Client) Leader(ctx context.Context, election string) (*Leader, error) {
	if err := checkName(election); err != nil {
		return nil, err
	}
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/elections/" + election})
	if err != nil {
		return nil, err
	}
	var body electionBody
	if err := decode(out, &body); err != nil {
		return nil, err
	}
	return body.Leader, nil
}

// electionBody is GET /v1/elections/{name} and each observe event.
type electionBody struct {
	Election string  `json:"election"`
	Leader   *Leader `json:"leader"`
}

// Cluster returns the members, leader and term as the answering member
// sees them.
func (c *Client) Cluster(ctx context.Context) (*ClusterStatus, error) {
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/cluster"})
	if err != nil {
		return nil, err
	}
	var st ClusterStatus
	if err := decode(out, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
