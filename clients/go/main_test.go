package raftlock

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.invalid/raftlock/clients/go/internal/testcluster"
)

// shared is the `raftlock up` cluster most tests use; tests that kill or
// stop members start their own.
var shared *testcluster.Cluster

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "raftlock-go-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = testcluster.StartUp(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test cluster: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	shared.Stop()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "cluster data and logs kept in %s\n", dir)
	}
	os.Exit(code)
}

// patience bounds every wait of a test: a failure bound, never a
// synchronisation device.
const patience = testcluster.Patience

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a client of endpoints (the shared cluster's by default).
func newClient(t *testing.T, endpoints []string, tweak func(*Config)) *Client {
	t.Helper()
	if endpoints == nil {
		endpoints = shared.Endpoints
	}
	cfg := Config{Endpoints: endpoints}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// openSession opens a session closed when the test ends.
func openSession(t *testing.T, c *Client, ttl time.Duration) *Session {
	t.Helper()
	s, err := NewSession(testCtx(t), c, t.Name(), ttl)
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

var nameSeq int64

// uniqueName is a lock, election or node name no other test uses.
func uniqueName(t *testing.T) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("go-test/%s-%d-%d", clean, os.Getpid(), atomic.AddInt64(&nameSeq, 1))
}

// eventually polls cond until it holds, failing the test after patience.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(patience)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v (last error: %v)", what, patience, last)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition
	}
}

// isDone reports whether ch is closed, without waiting.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
