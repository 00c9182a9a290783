package raftlock

import (
	"context"
	"sync"
)

// Election is leader election over a queue, as in etcd's concurrency
// package: the first candidate in line leads, and its value (an address,
// an id) is what everyone reads or observes. Leadership lasts until
// Resign or the session's end; Session.Done says when it may be over.
type Election struct {
	s    *Session
	name string
	// turn serializes this handle's campaigns.
	turn chan struct{}

	mu    sync.Mutex
	grant *Grant
}

// NewElection returns the election name for session s. It sends nothing.
func NewElection(s *Session, name string) *Election {
	return &Election{s: s, name: name, turn: make(chan struct{}, 1)}
}

// Name is the election's name.
func (e *Election) Name() string { return e.name }

// Campaign joins as a candidate with value and waits until elected, ctx
// ends, or the session is lost. Campaigning again while leading returns
// at once. When it gives up, the candidacy is withdrawn before Campaign
// returns (the error then matches ctx.Err() or ErrSessionLost).
func (e *Election) Campaign(ctx context.Context, value string) error {
	if err := checkName(e.name); err != nil {
		return err
	}
	if err := takeTurn(ctx, e.s, e.turn, false); err != nil {
		return err
	}
	defer func() { <-e.turn }()
	grant, err := e.s.waitForGrant(ctx, kindElection, e.name, value, 0, false)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.grant = grant
	e.mu.Unlock()
	return nil
}

// Proclaim changes the value everyone sees; ErrNotLeader unless this
// session leads.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	return e.s.note(e.s.client.Proclaim(ctx, e.name, e.s.id, value))
}

// Resign steps down, or withdraws a candidacy still waiting (which ends
// that Campaign with ErrWithdrawn). ErrNotFound or ErrNotOwner when this
// session is no candidate.
func (e *Election) Resign(ctx context.Context) error {
	err := e.s.note(e.s.client.Resign(ctx, e.name, e.s.id))
	if err == nil || alreadyGone(err) {
		e.mu.Lock()
		e.grant = nil
		e.mu.Unlock()
	}
	return err
}

// Leader returns the current leader, nil when there is none.
func (e *Election) Leader(ctx context.Context) (*Leader, error) {
	return e.s.client.Leader(ctx, e.name)
}

// Observe streams the current leader, then every change of leader or
// value, until ctx ends; see Client.Observe.
func (e *Election) Observe(ctx context.Context) <-chan ObserveEvent {
	return e.s.client.Observe(ctx, e.name)
}

// FencingToken is the token of this handle's won campaign, 0 when it has
// not won (or resigned): it increases with every new leader.
func (e *Election) FencingToken() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.grant == nil {
		return 0
	}
	return e.grant.FencingToken
}
