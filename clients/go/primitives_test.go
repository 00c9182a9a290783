package raftlock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Read-write locks, semaphores and multi-locks against the shared real
// cluster: each under contention from several sessions on clients that
// enter through different members.

// rotated is a client per member, each preferring another one.
func rotated(t *testing.T, n int) []*Client {
	e := shared.Endpoints
	clients := make([]*Client, n)
	for i := range clients {
		clients[i] = newClient(t, []string{e[i%3], e[(i+1)%3], e[(i+2)%3]}, nil)
	}
	return clients
}

// company lets a holder keep its hold until at least want sessions are
// queued in the lock (holders and waiters), or a short while passes (the
// others may be done): a second holder that should not be there then
// shows up inside together with it. Polls the state; never fails.
func company(entries func(context.Context) (int, error), want int) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for ctx.Err() == nil {
		if n, err := entries(ctx); err == nil && n >= want {
			return
		}
	}
}

// collect fails the test with every error sent on errs.
func collect(t *testing.T, errs chan error) {
	t.Helper()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Two writers and two readers contend: a writer is never inside with
// anyone, readers may be inside together, and write tokens increase.
func TestRWLockWritersExcludeEveryone(t *testing.T) {
	name := uniqueName(t)
	const rounds = 4
	var (
		writers, readers int32
		wg               sync.WaitGroup
		errs             = make(chan error, 64)
	)
	for w, c := range rotated(t, 4) {
		mode := Write
		if w >= 2 {
			mode = Read
		}
		l := NewRWLock(openSession(t, c, 10*time.Second), name)
		wg.Add(1)
		go func(w int, mode Mode) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				var err error
				if mode == Write {
					err = l.Lock(ctx)
				} else {
					err = l.RLock(ctx)
				}
				if err != nil {
					cancel()
					errs <- fmt.Errorf("%d %s: %w", w, mode, err)
					return
				}
				if l.Mode() != mode || l.FencingToken() == 0 {
					errs <- fmt.Errorf("%d: holds %q with token %d", w, l.Mode(), l.FencingToken())
				}
				entries := func(ctx context.Context) (int, error) {
					st, err := l.State(ctx)
					if err != nil {
						return 0, err
					}
					return len(st.Holders) + len(st.Waiters), nil
				}
				if mode == Write {
					if atomic.AddInt32(&writers, 1) != 1 || atomic.LoadInt32(&readers) != 0 {
						errs <- fmt.Errorf("writer %d inside with others", w)
					}
					company(entries, 2)
					if atomic.LoadInt32(&writers) != 1 || atomic.LoadInt32(&readers) != 0 {
						errs <- fmt.Errorf("writer %d joined inside by others", w)
					}
					atomic.AddInt32(&writers, -1)
				} else {
					atomic.AddInt32(&readers, 1)
					if atomic.LoadInt32(&writers) != 0 {
						errs <- fmt.Errorf("reader %d inside with a writer", w)
					}
					company(entries, 2)
					atomic.AddInt32(&readers, -1)
				}
				if err := l.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("%d unlock: %w", w, err)
				}
				cancel()
			}
		}(w, mode)
	}
	wg.Wait()
	collect(t, errs)
}

// Readers share; a try-write under them is refused; the state and the
// listing show both readers with their mode.
func TestRWLockReadersShare(t *testing.T) {
	ctx := testCtx(t)
	name := uniqueName(t)
	c := rotated(t, 3)
	a := NewRWLock(openSession(t, c[0], 10*time.Second), name)
	b := NewRWLock(openSession(t, c[1], 10*time.Second), name)
	w := NewRWLock(openSession(t, c[2], 10*time.Second), name)
	if err := a.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryRLock(ctx); err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if err := w.TryLock(ctx); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("try-write under readers: %v, want ErrLockHeld", err)
	}
	st, err := a.State(ctx)
	if err != nil || len(st.Holders) != 2 || st.Holders[0].Mode != Read || len(st.Waiters) != 0 {
		t.Fatalf("state: %+v, %v", st, err)
	}
	list, err := c[2].RWLocks(ctx, name)
	if err != nil || len(list) != 1 || list[0].Name != name || len(list[0].Holders) != 2 {
		t.Fatalf("listing: %+v, %v", list, err)
	}
	if err := w.Unlock(ctx); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("unlock without a hold: %v", err)
	}
	for _, l := range []*RWLock{a, b} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.TryLock(ctx); err != nil {
		t.Fatalf("try-write once free: %v", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Three sessions contend for a semaphore of two places: never three
// inside; another limit is refused.
func TestSemaphoreNeverAdmitsMoreThanItsPermits(t *testing.T) {
	name := uniqueName(t)
	const permits, rounds = 2, 4
	var (
		inside, most int32
		wg           sync.WaitGroup
		errs         = make(chan error, 64)
	)
	for w, c := range rotated(t, permits+1) {
		m := NewSemaphore(openSession(t, c, 10*time.Second), name, permits)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				if err := m.Acquire(ctx); err != nil {
					cancel()
					errs <- fmt.Errorf("%d acquire: %w", w, err)
					return
				}
				now := atomic.AddInt32(&inside, 1)
				if now > permits {
					errs <- fmt.Errorf("%d holders of %d places", now, permits)
				}
				for {
					seen := atomic.LoadInt32(&most)
					if now <= seen || atomic.CompareAndSwapInt32(&most, seen, now) {
						break
					}
				}
				// Hold until the others are queued too (a wrongly admitted
				// third holder would be inside now).
				company(func(ctx context.Context) (int, error) {
					st, err := m.State(ctx)
					if err != nil {
						return 0, err
					}
					return len(st.Holders) + len(st.Waiters), nil
				}, permits+1)
				if n := atomic.LoadInt32(&inside); n > permits {
					errs <- fmt.Errorf("%d holders of %d places", n, permits)
				}
				atomic.AddInt32(&inside, -1)
				if err := m.Release(ctx); err != nil {
					errs <- fmt.Errorf("%d release: %w", w, err)
				}
				cancel()
			}
		}(w)
	}
	wg.Wait()
	collect(t, errs)
	ctx := testCtx(t)
	holder := NewSemaphore(openSession(t, newClient(t, nil, nil), 10*time.Second), name, permits)
	if err := holder.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	other := NewSemaphore(openSession(t, newClient(t, nil, nil), 10*time.Second), name, permits+1)
	if err := other.TryAcquire(ctx); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("another limit: %v, want ErrLimitMismatch", err)
	}
	st, err := holder.State(ctx)
	if err != nil || st.Permits != permits || len(st.Holders) != 1 || st.Holders[0].Mode != "" {
		t.Fatalf("state: %+v, %v", st, err)
	}
	list, err := newClient(t, nil, nil).Semaphores(ctx, name)
	if err != nil || len(list) != 1 || list[0].Permits != permits {
		t.Fatalf("listing: %+v, %v", list, err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Two sets that overlap, named in opposite orders, contend without
// deadlock; a lock of both is never held by both; a try of an
// overlapping set takes none of its locks.
func TestMultiLockTakesAllOrNone(t *testing.T) {
	base := uniqueName(t)
	x, y, z := base+"/x", base+"/y", base+"/z"
	sets := [][]string{{x, y}, {y, z, x}}
	const rounds = 4
	var (
		holding int32
		wg      sync.WaitGroup
		errs    = make(chan error, 64)
	)
	for w, c := range rotated(t, 2) {
		m := NewMultiLock(openSession(t, c, 10*time.Second), sets[w]...)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				if err := m.Lock(ctx); err != nil {
					cancel()
					errs <- fmt.Errorf("%d lock: %w", w, err)
					return
				}
				if g := m.Grants(); len(g) != len(sets[w]) || g[0].Name != sets[w][0] || g[0].FencingToken != g[len(g)-1].FencingToken {
					errs <- fmt.Errorf("%d: grants %+v", w, g)
				}
				if !atomic.CompareAndSwapInt32(&holding, 0, 1) {
					errs <- fmt.Errorf("both sets held at once")
				}
				// Hold until the other set waits on the shared lock y.
				company(func(ctx context.Context) (int, error) {
					st, err := m.h.s.client.LockState(ctx, y)
					if err != nil || st.Holder == nil {
						return 0, err
					}
					return 1 + len(st.Waiters), nil
				}, 2)
				atomic.StoreInt32(&holding, 0)
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("%d unlock: %w", w, err)
				}
				cancel()
			}
		}(w)
	}
	wg.Wait()
	collect(t, errs)

	ctx := testCtx(t)
	c := rotated(t, 2)
	a := NewMultiLock(openSession(t, c[0], 10*time.Second), x, y)
	b := NewMultiLock(openSession(t, c[1], 10*time.Second), y, z)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("an overlapping set: %v, want ErrLockHeld", err)
	}
	if st, err := c[1].LockState(ctx, z); err != nil || st.Holder != nil {
		t.Fatalf("%s after a refused set: %+v, %v", z, st, err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A wait on a held read-write lock that runs out leaves nothing queued.
func TestRWLockAbandonedWaitLeavesNothing(t *testing.T) {
	ctx := testCtx(t)
	name := uniqueName(t)
	c := rotated(t, 2)
	w := NewRWLock(openSession(t, c[0], 10*time.Second), name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	r := NewRWLock(openSession(t, c[1], 10*time.Second), name)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := r.RLock(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait that runs out: %v", err)
	}
	st, err := w.State(ctx)
	if err != nil || len(st.Waiters) != 0 {
		t.Fatalf("waiters after the abandoned wait: %+v, %v", st, err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A member answering 503 overloaded is passed over by every primitive's
// requests, as by Mutex's (fake members: the real one would need a
// connection flood).
func TestSharedPrimitivesPassAnOverloadedMember(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiErr(w, 503, CodeOverloaded)
	}))
	defer broken.Close()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/rwlocks/a/acquire":
			writeJSON(w, 200, map[string]interface{}{"rwlock": "a", "mode": "write", "node": "/rwlocks/a/lock-1", "fencing_token": 7, "session_id": "s"})
		case "/v1/semaphores/a/acquire":
			writeJSON(w, 200, map[string]interface{}{"semaphore": "a", "permits": 2, "node": "/semaphores/a/lock-2", "fencing_token": 8, "session_id": "s"})
		case "/v1/multilocks/acquire":
			writeJSON(w, 200, map[string]interface{}{"session_id": "s", "locks": []map[string]interface{}{{"lock": "a", "node": "/locks/a/lock-3", "fencing_token": 9}}})
		default:
			w.WriteHeader(204)
		}
	}))
	defer healthy.Close()
	ctx := context.Background()
	for _, try := range []func(*Client) (uint64, error){
		func(c *Client) (uint64, error) {
			g, err := c.AcquireRWLock(ctx, "a", "s", Write, AcquireOptions{})
			if err != nil {
				return 0, err
			}
			return g.FencingToken, c.ReleaseRWLock(ctx, "a", "s")
		},
		func(c *Client) (uint64, error) {
			g, err := c.AcquireSemaphore(ctx, "a", "s", 2, AcquireOptions{})
			if err != nil {
				return 0, err
			}
			return g.FencingToken, c.ReleaseSemaphore(ctx, "a", "s")
		},
		func(c *Client) (uint64, error) {
			g, err := c.AcquireMulti(ctx, []string{"a"}, "s", AcquireOptions{})
			if err != nil || len(g) != 1 || g[0].SessionID != "s" {
				return 0, fmt.Errorf("%+v, %v", g, err)
			}
			return g[0].FencingToken, c.ReleaseMulti(ctx, []string{"a"}, "s")
		},
	} {
		c := newClient(t, []string{broken.URL, healthy.URL}, fast)
		token, err := try(c)
		if err != nil || token == 0 || c.preferred != 1 {
			t.Fatalf("past an overloaded member: token %d, %v, preferred %d", token, err, c.preferred)
		}
	}
}

// An election observer passes over a member answering 503 overloaded
// (nothing was done: docs/api.md) and follows the stream of the next.
func TestObservePassesAnOverloadedMember(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiErr(w, 503, CodeOverloaded)
	}))
	defer broken.Close()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/elections/e/observe" {
			w.WriteHeader(404)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: leader\ndata: {\"election\":\"e\",\"leader\":{\"session_id\":\"s\",\"value\":\"v\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer healthy.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newClient(t, []string{broken.URL, healthy.URL}, fast)
	if l := next(t, c.Observe(ctx, "e")); l == nil || l.SessionID != "s" {
		t.Fatalf("observed past an overloaded member: %+v", l)
	}
}
