package raftlock

import (
	"context"
	"errors"
	"sync"
)

// ReentrantMutex is a Mutex in reentrant mode: the holder may Lock it
// again without queueing, and the lock is released only when Unlock has
// been called as many times as Lock (Redisson's and Curator's
// semantics; the Rust client's ReentrantMutex; docs/adr/0010-reentrancy-counted-in-the-client.md).
//
// The hold count lives in this handle, not in the cluster: an acquire is
// resent after a lost answer (it is idempotent per session, docs/api.md),
// so a count kept by the server would count such a retry as a hold that
// nobody releases; and a re-entry costs no Raft write. The count does
// not survive a process restart, which loses its holders anyway.
//
// Go has no goroutine identity, so the count is per handle, as Curator's
// is per thread: while the handle holds the lock, every Lock through it
// re-enters at once, whichever goroutine calls it. Give each holder (a
// goroutine, or a call chain that re-enters) its own handle, and share a
// handle only with code that runs as part of the holder. A Lock that
// finds the handle not holding (not yet, or being released) queues as
// Mutex.Lock does.
type ReentrantMutex struct {
	m *Mutex

	mu sync.Mutex
	// count is how many Locks this handle holds, 0 when not held; it is
	// set to 0 before the last Unlock's release is sent, so nothing
	// re-enters a lock that is being given back.
	count int
}

// NewReentrantMutex returns the lock name for session s, in reentrant
// mode. It sends nothing.
func NewReentrantMutex(s *Session, name string) *ReentrantMutex {
	return NewMutex(s, name).Reentrant()
}

// Reentrant wraps m in reentrant mode. Use m only through the result from
// then on: a direct m.Unlock would release holds the count still
// stands for.
func (m *Mutex) Reentrant() *ReentrantMutex {
	return &ReentrantMutex{m: m}
}

// Name is the lock's name.
func (r *ReentrantMutex) Name() string { return r.m.Name() }

// Session is the session the lock is taken through.
func (r *ReentrantMutex) Session() *Session { return r.m.Session() }

// Lock counts one more hold at once (no request) when this handle holds
// the lock; otherwise it waits for it as Mutex.Lock does.
func (r *ReentrantMutex) Lock(ctx context.Context) error {
	return r.lock(ctx, r.m.Lock)
}

// TryLock counts one more hold when this handle holds the lock;
// otherwise it takes the lock only if it is free right now (ErrLockHeld
// if not), as Mutex.TryLock does.
func (r *ReentrantMutex) TryLock(ctx context.Context) error {
	return r.lock(ctx, r.m.TryLock)
}

func (r *ReentrantMutex) lock(ctx context.Context, acquire func(context.Context) error) error {
	if r.reenter() {
		return nil
	}
	if err := acquire(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.count = 1
	r.mu.Unlock()
	return nil
}

func (r *ReentrantMutex) reenter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == 0 {
		return false
	}
	r.count++
	return true
}

// Unlock gives one hold back; the last one releases the lock, with
// Mutex.Unlock's errors. ErrNotLocked when the handle holds nothing. When
// the release fails and the lock may still be held, the hold is kept:
// retry Unlock (or close the session).
func (r *ReentrantMutex) Unlock(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.count == 0:
		r.mu.Unlock()
		return ErrNotLocked
	case r.count > 1:
		r.count--
		r.mu.Unlock()
		return nil
	}
	r.count = 0
	r.mu.Unlock()

	err := r.m.Unlock(ctx)
	if err != nil && !alreadyGone(err) && !errors.Is(err, ErrNotLocked) {
		// Still held: the Mutex keeps its turn, so no other Lock
		// through this handle can have taken the lock meanwhile.
		r.mu.Lock()
		r.count = 1
		r.mu.Unlock()
	}
	return err
}

// HoldCount is how many Locks this handle holds now (0: not held).
func (r *ReentrantMutex) HoldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// FencingToken is the grant's fencing token, 0 when not held; the same
// for every hold of one grant.
func (r *ReentrantMutex) FencingToken() uint64 { return r.m.FencingToken() }

// Node is the grant's queue node, "" when not held.
func (r *ReentrantMutex) Node() string { return r.m.Node() }

// State returns the lock's holder and waiters as the cluster sees them.
func (r *ReentrantMutex) State(ctx context.Context) (*LockState, error) {
	return r.m.State(ctx)
}
