package raftlock

import (
	"context"
	"time"
)

// Semaphore is a distributed counting semaphore taken through a Session:
// at most Permits sessions hold a place at once, in FIFO order. Every
// holder must name the same Permits while anyone holds or waits
// (ErrLimitMismatch otherwise). One place per handle; waiting, retries,
// failover and cleanup are Mutex's.
type Semaphore struct {
	h       holding
	name    string
	permits uint64
}

// NewSemaphore returns semaphore name of permits places for session s.
// It sends nothing.
func NewSemaphore(s *Session, name string, permits uint64) *Semaphore {
	return &Semaphore{h: newHolding(s), name: name, permits: permits}
}

// Name is the semaphore's name.
func (m *Semaphore) Name() string { return m.name }

// Permits is the number of places this handle names.
func (m *Semaphore) Permits() uint64 { return m.permits }

// Acquire waits until a place is granted, ctx ends, or the session is
// lost.
func (m *Semaphore) Acquire(ctx context.Context) error { return m.acquire(ctx, false) }

// TryAcquire takes a place only if one is free right now; ErrLockHeld
// otherwise.
func (m *Semaphore) TryAcquire(ctx context.Context) error { return m.acquire(ctx, true) }

func (m *Semaphore) acquire(ctx context.Context, try bool) error {
	if err := checkName(m.name); err != nil {
		return err
	}
	c, id := m.h.s.client, m.h.s.id
	acquire := func(ctx context.Context, wait time.Duration, keep bool) ([]Grant, error) {
		return one(c.AcquireSemaphore(ctx, m.name, id, m.permits, AcquireOptions{Wait: wait, KeepQueued: keep}))
	}
	cancel := func(ctx context.Context) error { return c.ReleaseSemaphore(ctx, m.name, id) }
	return m.h.take(ctx, m.name, try, acquire, cancel)
}

// Release gives the place back. Errors as for Mutex.Unlock.
func (m *Semaphore) Release(ctx context.Context) error {
	c, id := m.h.s.client, m.h.s.id
	return m.h.give(ctx, func(ctx context.Context) error { return c.ReleaseSemaphore(ctx, m.name, id) })
}

// FencingToken is the current grant's fencing token, 0 when not held.
func (m *Semaphore) FencingToken() uint64 { return m.h.token() }

// State returns the semaphore's limit, holders and waiters.
func (m *Semaphore) State(ctx context.Context) (*SemaphoreState, error) {
	return m.h.s.client.SemaphoreState(ctx, m.name)
}
