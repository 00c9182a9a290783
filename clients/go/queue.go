package raftlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// What every recipe (Mutex, Election, RWLock, Semaphore, MultiLock) shares: waiting in a queue in long-poll slices,
// and never leaving a node behind when a wait is abandoned.

type queueKind int

const (
	kindLock queueKind = iota
	kindElection
)

// queueOps is how one kind of queue is waited in: one acquire request
// (a long poll of wait, keeping the queued entry on timeout when keep),
// and the release (or resign) that cancels the session's entry.
type queueOps struct {
	acquire func(ctx context.Context, wait time.Duration, keep bool) error
	cancel  func(ctx context.Context) error
}

// waitForGrant queues the session on lock or election name (with the
// candidate's value) and waits as waitFor does.
// lockDelay is the lock-delay a lock acquire asks for (0: none).
func (s *Session) waitForGrant(ctx context.Context, kind queueKind, name, value string, lockDelay time.Duration, try bool) (*Grant, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	var grant *Grant
	ops := queueOps{
		acquire: func(ctx context.Context, wait time.Duration, keep bool) error {
			var err error
			if kind == kindLock {
				grant, err = s.client.Acquire(ctx, name, s.id, AcquireOptions{Wait: wait, KeepQueued: keep, LockDelay: lockDelay})
			} else {
				grant, err = s.client.campaign(ctx, name, s.id, value, wait, keep)
			}
			return err
		},
		cancel: func(ctx context.Context) error {
			if kind == kindLock {
				return s.client.Release(ctx, name, s.id)
			}
			return s.client.Resign(ctx, name, s.id)
		},
	}
	if err := s.waitFor(ctx, name, try, ops); err != nil {
		return nil, err
	}
	return grant, nil
}

// waitFor queues the session (ops.acquire) and waits until granted, ctx
// ends, or the session is lost. try makes one request that does not wait
// (ErrLockHeld when taken). name only labels errors.
//
// A wait longer than Config.LongPoll is made of slices. Every slice but
// the last carries keep_queued, so the session keeps its place in the
// queue between slices; the last (the one that reaches ctx's deadline)
// does not, so a wait that runs out leaves nothing behind even if the
// cleanup below cannot be delivered.
//
// When the wait is abandoned (ctx ends, the session is lost) or its
// outcome is unknown (outcome_unknown, a request timeout, a dropped
// connection), the session's entry in the queue is released (ops.cancel)
// before the error is returned: a waiting entry would otherwise be
// granted later and hold, unused, until the session ends.
func (s *Session) waitFor(ctx context.Context, name string, try bool, ops queueOps) error {
	if err := s.Err(); err != nil {
		return fmt.Errorf("raftlock: %s: %w", name, err)
	}
	wctx, cancel := s.bind(ctx)
	defer cancel()
	longPoll := s.client.cfg.LongPoll
	for {
		var wait time.Duration
		last := true
		if !try {
			wait, last = longPoll, false
			if deadline, ok := ctx.Deadline(); ok {
				if left := time.Until(deadline); left <= longPoll {
					wait, last = left, true
					if wait < time.Millisecond {
						// Never a try-lock by accident; ctx ends first.
						wait = time.Millisecond
					}
				}
			}
		}
		err := ops.acquire(wctx, wait, !last)
		if err == nil {
			return nil
		}
		s.note(err)
		if !try && isCode(err, CodeTimeout) && ctx.Err() == nil && s.Err() == nil {
			continue
		}
		return s.abandon(ctx, name, ops, err)
	}
}

// abandon ends a wait that failed with err: it releases whatever the wait
// may have left queued, then says why the wait ended.
func (s *Session) abandon(ctx context.Context, name string, ops queueOps, err error) error {
	lost := s.Err()
	definite := isCode(err, CodeLockHeld, CodeBadRequest, CodeWithdrawn, CodeSessionNotFound,
		CodeTooLarge, CodeUnsupportedMediaType, CodeMethodNotAllowed, CodeLimitMismatch)
	gone := lost != nil && errors.Is(lost, ErrSessionNotFound)
	if !gone && (!definite || ctx.Err() != nil || lost != nil) {
		s.cancelQueued(ops)
	}
	switch {
	case lost != nil:
		return fmt.Errorf("raftlock: waiting for %s: %w", name, lost)
	case ctx.Err() != nil:
		return fmt.Errorf("raftlock: waiting for %s: %w", name, ctx.Err())
	}
	return err
}

// cancelQueued releases (or resigns) the session's entry, bounded by the
// request timeout and independent of any caller's context (which may be
// what ended). If it cannot be delivered either, the entry goes when the
// session ends.
func (s *Session) cancelQueued(ops queueOps) {
	ctx, cancel := context.WithTimeout(context.Background(), s.client.cfg.RequestTimeout)
	defer cancel()
	s.note(ops.cancel(ctx))
}

// takeTurn takes a handle's local turn (a channel of capacity 1) within
// the caller's patience: a recipe handle runs one queue operation at a
// time, because the cluster keeps one node per session and queue and two
// callers would share it.
func takeTurn(ctx context.Context, s *Session, turn chan struct{}, try bool) error {
	if try {
		select {
		case turn <- struct{}{}:
			return nil
		default:
			return apiError(CodeLockHeld, "this handle holds the lock, or another goroutine is acquiring it")
		}
	}
	select {
	case turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return s.Err()
	}
}
