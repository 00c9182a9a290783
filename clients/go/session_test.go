package raftlock

import (
	"errors"
	"testing"
	"time"

	"example.invalid/raftlock/clients/go/internal/testcluster"
)

func TestLostMargin(t *testing.T) {
	for _, tc := range []struct{ ttl, want time.Duration }{
		{600 * time.Millisecond, 300 * time.Millisecond}, // capped at ttl/2
		{time.Second, 500 * time.Millisecond},
		{2 * time.Second, 500 * time.Millisecond}, // the 500 ms floor
		{10 * time.Second, time.Second},           // ttl/10
		{time.Minute, 6 * time.Second},
	} {
		if got := LostMargin(tc.ttl); got != tc.want {
			t.Errorf("LostMargin(%v) = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

func TestSessionKeepsItselfAliveAndCloses(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, nil)
	ttl := 1500 * time.Millisecond
	s := openSession(t, c, ttl)
	if s.TTL() != ttl {
		t.Fatalf("granted TTL %v, want %v", s.TTL(), ttl)
	}
	opened := s.LastRenewed()
	if got := s.LostAt(); !got.Equal(opened.Add(ttl - LostMargin(ttl))) {
		t.Fatalf("LostAt %v, want LastRenewed + ttl - margin", got)
	}
	// Outlive the TTL twice over on background keepalives alone.
	eventually(t, "keepalives renew the session past two TTLs", func() (bool, error) {
		return s.LastRenewed().Sub(opened) > 2*ttl, s.Err()
	})
	if isDone(s.Done()) {
		t.Fatalf("session lost while kept alive: %v", s.Err())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !isDone(s.Done()) || !errors.Is(s.Err(), ErrSessionClosed) || !errors.Is(s.Err(), ErrSessionLost) {
		t.Fatalf("after Close: done=%v err=%v", isDone(s.Done()), s.Err())
	}
	if _, err := c.Keepalive(ctx, s.ID()); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("keepalive of a closed session: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// session_not_found, to any call, closes Done at once.
func TestSessionDoneAtOnceOnSessionNotFound(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, nil)
	s := openSession(t, c, 10*time.Second)
	if err := c.CloseSession(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	if isDone(s.Done()) {
		t.Fatal("Done closed before the session heard of it")
	}
	if _, err := s.Keepalive(ctx); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("keepalive: %v, want ErrSessionNotFound", err)
	}
	if !isDone(s.Done()) {
		t.Fatal("Done must close on session_not_found")
	}
	if !errors.Is(s.Err(), ErrSessionNotFound) || !errors.Is(s.Err(), ErrSessionLost) {
		t.Fatalf("Err: %v", s.Err())
	}
}

// With the whole cluster stopped no keepalive succeeds: Done closes at
// LostAt, before the earliest moment the cluster could have expired the
// session (last successful send + TTL).
func TestSessionDoneWhenClusterStops(t *testing.T) {
	cluster, err := testcluster.StartUp(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	c := newClient(t, cluster.Endpoints, nil)
	ttl := 2 * time.Second
	s := openSession(t, c, ttl)
	cluster.Stop()
	select {
	case <-s.Done():
	case <-time.After(patience):
		t.Fatal("Done did not close after the cluster stopped")
	}
	now := time.Now()
	expiry := s.LastRenewed().Add(ttl)
	if !now.Before(expiry) {
		t.Fatalf("Done closed at %v, not before the earliest expiry %v", now, expiry)
	}
	if now.Before(s.LostAt()) {
		t.Fatalf("Done closed at %v, before LostAt %v", now, s.LostAt())
	}
	if !errors.Is(s.Err(), ErrKeepaliveFailed) || !errors.Is(s.Err(), ErrSessionLost) {
		t.Fatalf("Err: %v, want ErrKeepaliveFailed", s.Err())
	}
}
