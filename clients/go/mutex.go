package raftlock

import (
	"context"
	"sync"
	"time"
)

// Mutex is a distributed lock taken through a Session: the cluster grants
// it to one session at a time, in FIFO order, with a fencing token.
//
// Use one Mutex per (session, lock name): the cluster keeps one node per
// session and lock, so two handles of one session would share a grant.
// Within a handle, Lock waits while another goroutine holds or acquires
// it, as sync.Mutex does.
//
// Holding ends at Unlock or when the session ends; watch Session.Done
// while working under the lock, and pass FencingToken to storage that
// checks it.
type Mutex struct {
	s    *Session
	name string
	// turn is held (one value in it) while this handle acquires or
	// holds the lock.
	turn chan struct{}
	// lockDelay is asked for by every acquire (WithLockDelay).
	lockDelay time.Duration

	mu        sync.Mutex
	grant     *Grant
	unlocking bool
}

// NewMutex returns the lock name (e.g. "orders/42") for session s. It
// sends nothing.
func NewMutex(s *Session, name string) *Mutex {
	return &Mutex{s: s, name: name, turn: make(chan struct{}, 1)}
}

// WithLockDelay sets the lock's lock-delay (AcquireOptions.LockDelay):
// after a holder's session expires or is closed, nobody is granted the
// lock for d, so a holder that lost its session but still writes does
// not overlap its successor. Unlock skips the delay. Call it before
// Lock; it returns m.
func (m *Mutex) WithLockDelay(d time.Duration) *Mutex {
	m.lockDelay = d
	return m
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// Session is the session the lock is taken through.
func (m *Mutex) Session() *Session { return m.s }

// Lock waits until the lock is granted, ctx ends, or the session is
// lost. A wait longer than Config.LongPoll is made of long polls that
// keep the session's place in the queue. When it gives up, the queued
// node is released before Lock returns (the error then matches ctx.Err()
// or ErrSessionLost); so is a node whose acquire had an unknown outcome.
func (m *Mutex) Lock(ctx context.Context) error {
	return m.lock(ctx, false)
}

// TryLock takes the lock only if it is free right now; ErrLockHeld
// otherwise (also while this handle holds it or is acquiring it).
func (m *Mutex) TryLock(ctx context.Context) error {
	return m.lock(ctx, true)
}

func (m *Mutex) lock(ctx context.Context, try bool) error {
	if err := checkName(m.name); err != nil {
		return err
	}
	if err := takeTurn(ctx, m.s, m.turn, try); err != nil {
		return err
	}
	grant, err := m.s.waitForGrant(ctx, kindLock, m.name, "", m.lockDelay, try)
	if err != nil {
		<-m.turn
		return err
	}
	m.mu.Lock()
	m.grant = grant
	m.mu.Unlock()
	return nil
}

// Unlock releases the lock. ErrNotLocked when this handle does not hold
// it. ErrNotFound, ErrNotOwner or ErrSessionNotFound say the lock had
// already been lost (the handle is unlocked all the same). Any other
// error leaves the handle locked: the lock may still be held, so retry
// Unlock (or close the session).
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	if m.grant == nil || m.unlocking {
		m.mu.Unlock()
		return ErrNotLocked
	}
	m.unlocking = true
	m.mu.Unlock()

	err := m.s.note(m.s.client.Release(ctx, m.name, m.s.id))

	m.mu.Lock()
	defer m.mu.Unlock()
	m.unlocking = false
	if err != nil && !alreadyGone(err) {
		return err
	}
	m.grant = nil
	<-m.turn
	return err
}

// FencingToken is the current grant's fencing token, 0 when not held:
// strictly greater than every token granted before it, on any lock.
func (m *Mutex) FencingToken() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant == nil {
		return 0
	}
	return m.grant.FencingToken
}

// Node is the current grant's queue node (/locks/orders/42/lock-…), ""
// when not held.
func (m *Mutex) Node() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant == nil {
		return ""
	}
	return m.grant.Node
}

// State returns the lock's holder and waiters as the cluster sees them.
func (m *Mutex) State(ctx context.Context) (*LockState, error) {
	return m.s.client.LockState(ctx, m.name)
}
