package raftlock

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingTransport counts acquire requests.
type countingTransport struct{ acquires int64 }

func (ct *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/acquire") {
		atomic.AddInt64(&ct.acquires, 1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// NEEDS A SERVER WITH keep_queued: the server at HEAD rejects
// the field as unknown (bad_request), and this test then fails on
// purpose with a message saying so.
//
// Waiters whose waits outlast many long-poll slices keep their places
// (their very nodes) in the queue, and are granted in FIFO order.
func TestLongWaitKeepsFIFOPlaceAcrossSlices(t *testing.T) {
	ctx := testCtx(t)
	name := uniqueName(t)
	holder := NewMutex(openSession(t, newClient(t, nil, nil), 10*time.Second), name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	type waiter struct {
		m      *Mutex
		count  *countingTransport
		result chan error
		node   string
	}
	start := func() *waiter {
		w := &waiter{count: &countingTransport{}, result: make(chan error, 1)}
		c := newClient(t, nil, func(cfg *Config) {
			cfg.LongPoll = 300 * time.Millisecond
			cfg.Transport = w.count
		})
		w.m = NewMutex(openSession(t, c, 10*time.Second), name)
		go func() { w.result <- w.m.Lock(ctx) }() // no deadline of its own: all slices keep_queued
		return w
	}
	failIfRejected := func(w *waiter) {
		select {
		case err := <-w.result:
			if errors.Is(err, ErrBadRequest) && strings.Contains(err.Error(), "keep_queued") {
				t.Fatalf("the server rejects keep_queued: this test needs a raftlock server with keep_queued: %v", err)
			}
			t.Fatalf("waiter ended early: %v", err)
		default:
		}
	}
	queue := func() []Waiter {
		st, err := holder.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Waiters
	}

	b := start()
	eventually(t, "b queued", func() (bool, error) {
		failIfRejected(b)
		q := queue()
		if len(q) == 1 {
			b.node = q[0].Node
		}
		return len(q) == 1, nil
	})
	c := start()
	eventually(t, "c queued behind b", func() (bool, error) {
		failIfRejected(c)
		q := queue()
		if len(q) == 2 {
			c.node = q[1].Node
		}
		return len(q) == 2, nil
	})
	eventually(t, "both waited through several slices", func() (bool, error) {
		failIfRejected(b)
		failIfRejected(c)
		return atomic.LoadInt64(&b.count.acquires) >= 4 && atomic.LoadInt64(&c.count.acquires) >= 4, nil
	})
	if q := queue(); len(q) != 2 || q[0].Node != b.node || q[1].Node != c.node {
		t.Fatalf("queue after many slices: %+v, want b's node %s then c's %s, unchanged", q, b.node, c.node)
	}

	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	granted := func(w *waiter, who string) {
		t.Helper()
		select {
		case err := <-w.result:
			if err != nil {
				t.Fatalf("%s: %v", who, err)
			}
		case <-time.After(patience):
			t.Fatalf("%s was not granted", who)
		}
		if w.m.Node() != w.node {
			t.Fatalf("%s granted node %s, want its queued node %s", who, w.m.Node(), w.node)
		}
	}
	granted(b, "b (first in line)")
	if q := queue(); len(q) != 1 || q[0].Node != c.node {
		t.Fatalf("after b's grant the queue is %+v, want c alone", q)
	}
	if err := b.m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	granted(c, "c")
	if err := c.m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}
