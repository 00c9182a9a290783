package raftlock

import (
	"context"
	"time"
)

// MultiLock takes several locks (the ordinary locks of Mutex) atomically
// through a Session: every one or none, queued as one entry, so two sets
// that overlap, named in any order, cannot deadlock. Released together.
// Waiting, retries, failover and cleanup are Mutex's.
type MultiLock struct {
	h     holding
	locks []string
}

// NewMultiLock returns the set of locks for session s. It sends nothing.
func NewMultiLock(s *Session, locks ...string) *MultiLock {
	return &MultiLock{h: newHolding(s), locks: append([]string(nil), locks...)}
}

// Names are the locks of the set, in the order given.
func (m *MultiLock) Names() []string { return append([]string(nil), m.locks...) }

// Lock waits until every lock is granted, ctx ends, or the session is
// lost.
func (m *MultiLock) Lock(ctx context.Context) error { return m.lock(ctx, false) }

// TryLock takes the locks only if all are free right now; ErrLockHeld
// otherwise (and none is taken).
func (m *MultiLock) TryLock(ctx context.Context) error { return m.lock(ctx, true) }

func (m *MultiLock) lock(ctx context.Context, try bool) error {
	if err := checkNames(m.locks); err != nil {
		return err
	}
	c, id := m.h.s.client, m.h.s.id
	acquire := func(ctx context.Context, wait time.Duration, keep bool) ([]Grant, error) {
		return c.AcquireMulti(ctx, m.locks, id, AcquireOptions{Wait: wait, KeepQueued: keep})
	}
	cancel := func(ctx context.Context) error { return c.ReleaseMulti(ctx, m.locks, id) }
	return m.h.take(ctx, joinNames(m.locks), try, acquire, cancel)
}

// Unlock releases every lock of the set. Errors as for Mutex.Unlock.
func (m *MultiLock) Unlock(ctx context.Context) error {
	c, id := m.h.s.client, m.h.s.id
	return m.h.give(ctx, func(ctx context.Context) error { return c.ReleaseMulti(ctx, m.locks, id) })
}

// Grants are the current grants, one per lock in the order named (all
// with the same fencing token); nil when not held.
func (m *MultiLock) Grants() []Grant { return m.h.held() }

// FencingToken is the set's fencing token, 0 when not held.
func (m *MultiLock) FencingToken() uint64 { return m.h.token() }
