package raftlock

import (
	"context"
	"sync"
	"time"
)

// RWLock is a distributed read-write lock taken through a Session: many
// readers or one writer, in FIFO order (a reader that arrives while a
// writer waits queues behind it, so readers never starve a writer). Each
// grant has its own fencing token.
//
// One handle holds one mode at a time; use one handle per (session,
// name) as with Mutex. Waiting, retries, failover and cleanup are
// Mutex's.
type RWLock struct {
	h    holding
	name string
	mu   sync.Mutex
	mode Mode
}

// NewRWLock returns read-write lock name for session s. It sends nothing.
func NewRWLock(s *Session, name string) *RWLock {
	return &RWLock{h: newHolding(s), name: name}
}

// Name is the read-write lock's name.
func (l *RWLock) Name() string { return l.name }

// RLock waits until the lock is granted for reading (shared), ctx ends,
// or the session is lost.
func (l *RWLock) RLock(ctx context.Context) error { return l.lock(ctx, Read, false) }

// Lock waits until the lock is granted for writing (alone).
func (l *RWLock) Lock(ctx context.Context) error { return l.lock(ctx, Write, false) }

// TryRLock takes the lock for reading only if that is possible right
// now; ErrLockHeld otherwise.
func (l *RWLock) TryRLock(ctx context.Context) error { return l.lock(ctx, Read, true) }

// TryLock takes the lock for writing only if it is free right now.
func (l *RWLock) TryLock(ctx context.Context) error { return l.lock(ctx, Write, true) }

func (l *RWLock) lock(ctx context.Context, mode Mode, try bool) error {
	if err := checkName(l.name); err != nil {
		return err
	}
	c, id := l.h.s.client, l.h.s.id
	acquire := func(ctx context.Context, wait time.Duration, keep bool) ([]Grant, error) {
		return one(c.AcquireRWLock(ctx, l.name, id, mode, AcquireOptions{Wait: wait, KeepQueued: keep}))
	}
	cancel := func(ctx context.Context) error { return c.ReleaseRWLock(ctx, l.name, id) }
	if err := l.h.take(ctx, l.name, try, acquire, cancel); err != nil {
		return err
	}
	l.mu.Lock()
	l.mode = mode
	l.mu.Unlock()
	return nil
}

// Unlock releases the lock (either mode). Errors as for Mutex.Unlock.
func (l *RWLock) Unlock(ctx context.Context) error {
	c, id := l.h.s.client, l.h.s.id
	return l.h.give(ctx, func(ctx context.Context) error { return c.ReleaseRWLock(ctx, l.name, id) })
}

// Mode is the mode held, "" when not held.
func (l *RWLock) Mode() Mode {
	if l.h.held() == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mode
}

// FencingToken is the current grant's fencing token, 0 when not held.
func (l *RWLock) FencingToken() uint64 { return l.h.token() }

// State returns the lock's holders and waiters as the cluster sees them.
func (l *RWLock) State(ctx context.Context) (*RWLockState, error) {
	return l.h.s.client.RWLockState(ctx, l.name)
}
