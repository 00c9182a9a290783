package raftlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// What Mutex and Election share: waiting in a queue in long-poll slices,
// and never leaving a node behind when a wait is abandoned.

type queueKind int

const (
	kindLock queueKind = iota
	kindElection
)

// waitForGrant queues the session on name and waits until granted, ctx
// ends, or the session is lost. try makes one request that does not wait
// (ErrLockHeld when taken).
//
// A wait longer than Config.LongPoll is made of slices. Every slice but
// the last carries keep_queued, so the session keeps its place in the
// queue between slices; the last (the one that reaches ctx's deadline)
// does not, so a wait that runs out leaves nothing behind even if the
// cleanup below cannot be delivered.
//
// When the wait is abandoned (ctx ends, the session is lost) or its
// outcome is unknown (outcome_unknown, a request timeout, a dropped
// connection), the session's node in the queue is released before the
// error is returned: a waiting node would otherwise be granted the lock
// later and hold it, unused, until the session ends.
func (s *Session) waitForGrant(ctx context.Context, kind queueKind, name, value string, try bool) (*Grant, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("raftlock: %s: %w", name, err)
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
		keep := !last
		var grant *Grant
		var err error
		if kind == kindLock {
			grant, err = s.client.Acquire(wctx, name, s.id, AcquireOptions{Wait: wait, KeepQueued: keep})
		} else {
			grant, err = s.client.campaign(wctx, name, s.id, value, wait, keep)
		}
		if err == nil {
			return grant, nil
		}
		s.note(err)
		if !try && isCode(err, CodeTimeout) && ctx.Err() == nil && s.Err() == nil {
			continue
		}
		return nil, s.abandon(ctx, kind, name, err)
	}
}

// abandon ends a wait that failed with err: it releases whatever the wait
// may have left queued, then says why the wait ended.
func (s *Session) abandon(ctx context.Context, kind queueKind, name string, err error) error {
	lost := s.Err()
	definite := isCode(err, CodeLockHeld, CodeBadRequest, CodeWithdrawn, CodeSessionNotFound,
		CodeTooLarge, CodeUnsupportedMediaType, CodeMethodNotAllowed)
	gone := lost != nil && errors.Is(lost, ErrSessionNotFound)
	if !gone && (!definite || ctx.Err() != nil || lost != nil) {
		s.cancelQueued(kind, name)
	}
	switch {
	case lost != nil:
		return fmt.Errorf("raftlock: waiting for %s: %w", name, lost)
	case ctx.Err() != nil:
		return fmt.Errorf("raftlock: waiting for %s: %w", name, ctx.Err())
	}
	return err
}

// cancelQueued releases (or resigns) the session's node in name, bounded
// by the request timeout and independent of any caller's context (which
// may be what ended). If it cannot be delivered either, the node goes
// when the session ends.
func (s *Session) cancelQueued(kind queueKind, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.client.cfg.RequestTimeout)
	defer cancel()
	if kind == kindLock {
		s.note(s.client.Release(ctx, name, s.id))
	} else {
		s.note(s.client.Resign(ctx, name, s.id))
	}
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
