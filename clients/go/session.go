package raftlock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// LostMargin is how long before the earliest possible expiry a session
// counts as lost: max(ttl/10, 500 ms), at most ttl/2.
//
// The server restarts a session's TTL when it handles a keepalive, which
// is after the client sent it, and a Raft leader change only ever
// lengthens a session. So a session cannot expire before (send time of
// the last successful keepalive) + TTL. Done closes the margin earlier:
// that is the application's time to notice and stop (a goroutine
// wake-up on a busy machine, aborting a write in flight) before another
// client can be granted its locks. 10 % scales with the TTL; the 500 ms
// floor is there because reaction time does not shrink with the TTL; the
// ttl/2 cap keeps the deadline after the first keepalive (sent every
// ttl/3) for very short TTLs. The Rust client uses the same rule.
func LostMargin(ttl time.Duration) time.Duration {
	m := ttl / 10
	if m < 500*time.Millisecond {
		m = 500 * time.Millisecond
	}
	if m > ttl/2 {
		m = ttl / 2
	}
	return m
}

// Session is a lease on the cluster, kept alive by a background
// goroutine (a keepalive every ttl/3, retried sooner after a failure)
// until Close. Locks and candidacies taken through it end with it.
//
// Done is closed when the session is, or may be, gone: at
// LostAt = (send time of the last successful keepalive) + ttl −
// LostMargin(ttl) if no keepalive has succeeded by then, or at once when
// the cluster answers session_not_found to any call. From then on Err
// says why, and the session cannot be revived: open a new one.
type Session struct {
	client *Client
	id     string
	ttl    time.Duration
	margin time.Duration

	mu sync.Mutex
	// renewed is the send time of the last keepalive (or of the open)
	// that succeeded; the server's deadline is at least renewed + ttl.
	renewed time.Time
	// err is set once, with done closed, when the session is lost.
	err  error
	done chan struct{}

	// stop ends the keepalive goroutine (Close); stopped is closed when
	// it has ended.
	stop      chan struct{}
	stopOnce  sync.Once
	stopped   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// NewSession opens a session with this TTL (the cluster's bounds default
// to 1 s – 1 h) and owner label, and starts keeping it alive.
func NewSession(ctx context.Context, client *Client, owner string, ttl time.Duration) (*Session, error) {
	sent := time.Now()
	id, granted, err := client.OpenSession(ctx, owner, ttl)
	if err != nil {
		return nil, err
	}
	s := &Session{
		client:  client,
		id:      id,
		ttl:     granted,
		margin:  LostMargin(granted),
		renewed: sent,
		done:    make(chan struct{}),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go s.keepAlive()
	return s, nil
}

// ID is the session's id (32 hex digits).
func (s *Session) ID() string { return s.id }

// TTL is the time to live the cluster granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Client is the client the session and its recipes use.
func (s *Session) Client() *Client { return s.client }

// Done is closed when the session is, or may be, lost (see Session).
// Select on it next to the work its locks protect.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is nil while the session lives. After Done is closed it matches
// ErrSessionLost and the reason: ErrSessionClosed, ErrSessionNotFound
// (expired or closed elsewhere) or ErrKeepaliveFailed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastRenewed is the send time of the last successful keepalive (or of
// the open).
func (s *Session) LastRenewed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed
}

// LostAt is when Done closes unless a keepalive succeeds first:
// LastRenewed() + TTL() − LostMargin(TTL()).
func (s *Session) LostAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostAtLocked()
}

func (s *Session) lostAtLocked() time.Time {
	return s.renewed.Add(s.ttl - s.margin)
}

// markLost closes Done with reason, unless it is closed already.
func (s *Session) markLost(reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = &lostError{reason: reason}
		close(s.done)
	}
}

// note passes err through, closing Done on session_not_found.
func (s *Session) note(err error) error {
	if isCode(err, CodeSessionNotFound) {
		s.markLost(err)
	}
	return err
}

// Keepalive sends a keepalive now (the background goroutine does this by
// itself) and returns the TTL.
func (s *Session) Keepalive(ctx context.Context) (time.Duration, error) {
	if err := s.Err(); err != nil {
		return 0, err
	}
	sent := time.Now()
	ttl, err := s.client.Keepalive(ctx, s.id)
	if err != nil {
		return 0, s.note(err)
	}
	s.mu.Lock()
	if s.err == nil && sent.After(s.renewed) {
		s.renewed = sent
	}
	s.mu.Unlock()
	return ttl, nil
}

// Close stops the keepalive and closes the session on the cluster,
// releasing its locks; Done closes with ErrSessionClosed. A session the
// cluster no longer knows counts as closed. Later calls return the first
// call's result.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.markLost(ErrSessionClosed)
		s.stopOnce.Do(func() { close(s.stop) })
		<-s.stopped
		err := s.client.CloseSession(ctx, s.id)
		if isCode(err, CodeSessionNotFound) {
			err = nil
		}
		s.closeErr = err
	})
	return s.closeErr
}

// keepAlive is the background goroutine: a keepalive every ttl/3 after
// the last success, retried every ttl/10 (50 ms – 1 s) after a failure,
// each bounded by the loss deadline. It ends when the session is lost.
func (s *Session) keepAlive() {
	defer close(s.stopped)
	interval := s.ttl / 3
	retry := s.ttl / 10
	if retry < 50*time.Millisecond {
		retry = 50 * time.Millisecond
	}
	if retry > time.Second {
		retry = time.Second
	}
	// ctx ends the keepalive in flight on Close or loss.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
		case <-s.done:
		}
		cancel()
	}()
	var lastErr error
	next := s.LastRenewed().Add(interval)
	for {
		deadline := s.LostAt()
		if !next.Before(deadline) {
			if !s.sleepUntil(deadline) {
				return
			}
			// A manual keepalive may have moved the deadline meanwhile.
			if !time.Now().Before(s.LostAt()) {
				s.markLost(keepaliveFailed(lastErr))
				return
			}
			next = time.Now()
			continue
		}
		if !s.sleepUntil(next) {
			return
		}
		kctx, kcancel := context.WithDeadline(ctx, s.LostAt())
		_, err := s.Keepalive(kctx)
		kcancel()
		switch {
		case err == nil:
			next = s.LastRenewed().Add(interval)
		case s.Err() != nil || ctx.Err() != nil:
			return
		case !time.Now().Before(s.LostAt()):
			s.markLost(keepaliveFailed(err))
			return
		default:
			lastErr = err
			next = time.Now().Add(retry)
		}
	}
}

// sleepUntil waits for t; false when the session was closed or lost
// meanwhile.
func (s *Session) sleepUntil(t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-s.stop:
		return false
	case <-s.done:
		return false
	}
}

// bind returns ctx, also cancelled when the session is lost.
func (s *Session) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	bound, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-bound.Done():
		}
	}()
	return bound, cancel
}

// keepaliveFailed is the loss reason after keepalives failed for too
// long; it matches ErrKeepaliveFailed and names the last failure.
func keepaliveFailed(last error) error {
	if last == nil {
		return ErrKeepaliveFailed
	}
	return fmt.Errorf("%w (last: %v)", ErrKeepaliveFailed, last)
}
