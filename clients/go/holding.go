package raftlock

import (
	"context"
	"sync"
	"time"
)

// holding is what RWLock, Semaphore and MultiLock handles keep, as Mutex
// does: one queue operation at a time per handle (turn), and the grants
// of the current hold.
type holding struct {
	s *Session
	// turn is held (one value in it) while the handle acquires or holds.
	turn chan struct{}

	mu        sync.Mutex
	grants    []Grant
	unlocking bool
}

func newHolding(s *Session) holding {
	return holding{s: s, turn: make(chan struct{}, 1)}
}

// take waits for the grants (Session.waitFor: long-poll slices, cleanup
// on abandon) and keeps them. acquire makes one request.
func (h *holding) take(ctx context.Context, label string, try bool,
	acquire func(ctx context.Context, wait time.Duration, keep bool) ([]Grant, error),
	cancel func(ctx context.Context) error) error {
	if err := takeTurn(ctx, h.s, h.turn, try); err != nil {
		return err
	}
	var grants []Grant
	ops := queueOps{
		acquire: func(ctx context.Context, wait time.Duration, keep bool) error {
			var err error
			grants, err = acquire(ctx, wait, keep)
			return err
		},
		cancel: cancel,
	}
	if err := h.s.waitFor(ctx, label, try, ops); err != nil {
		<-h.turn
		return err
	}
	h.mu.Lock()
	h.grants = grants
	h.mu.Unlock()
	return nil
}

// give releases the hold. ErrNotLocked when the handle holds nothing.
// ErrNotFound, ErrNotOwner or ErrSessionNotFound say it had already been
// lost (the handle is released all the same); any other error leaves it
// held: retry.
func (h *holding) give(ctx context.Context, release func(ctx context.Context) error) error {
	h.mu.Lock()
	if h.grants == nil || h.unlocking {
		h.mu.Unlock()
		return ErrNotLocked
	}
	h.unlocking = true
	h.mu.Unlock()

	err := h.s.note(release(ctx))

	h.mu.Lock()
	defer h.mu.Unlock()
	h.unlocking = false
	if err != nil && !alreadyGone(err) {
		return err
	}
	h.grants = nil
	<-h.turn
	return err
}

// held is a copy of the current grants, nil when not held.
func (h *holding) held() []Grant {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.grants == nil {
		return nil
	}
	return append([]Grant(nil), h.grants...)
}

// token is the first grant's fencing token, 0 when not held.
func (h *holding) token() uint64 {
	if g := h.held(); len(g) > 0 {
		return g[0].FencingToken
	}
	return 0
}

func one(g *Grant, err error) ([]Grant, error) {
	if err != nil {
		return nil, err
	}
	return []Grant{*g}, nil
}
