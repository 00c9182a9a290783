package raftlock

// Tests of the client's own logic against fake servers (httptest): the
// failover order, retries, long-poll slicing and cleanup after unknown
// outcomes, none of which a healthy cluster can be made to show on cue.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const fakeSession = "0123456789abcdef0123456789abcdef"

// fake is a raftlock stand-in: sessions always work; acquires do what
// the test says; releases are counted.
type fake struct {
	t       *testing.T
	mu      sync.Mutex
	bodies  []map[string]interface{}
	release int
	// acquire answers one acquire (the body already recorded).
	acquire func(w http.ResponseWriter, r *http.Request, body map[string]interface{})
}

func newFake(t *testing.T, acquire func(http.ResponseWriter, *http.Request, map[string]interface{})) (*fake, string) {
	f := &fake{t: t, acquire: acquire}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func writeJSON(w http.ResponseWriter, status int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiErr(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code, "message": "fake " + code})
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions":
		writeJSON(w, 201, map[string]interface{}{"session_id": fakeSession, "ttl_ms": 60000})
	case strings.HasSuffix(r.URL.Path, "/keepalive"):
		writeJSON(w, 200, map[string]interface{}{"ttl_ms": 60000})
	case r.Method == http.MethodDelete:
		w.WriteHeader(204)
	case strings.HasSuffix(r.URL.Path, "/acquire"):
		var body map[string]interface{}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			apiErr(w, 400, CodeBadRequest)
			return
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.mu.Unlock()
		f.acquire(w, r, body)
	case strings.HasSuffix(r.URL.Path, "/release"):
		f.mu.Lock()
		f.release++
		f.mu.Unlock()
		w.WriteHeader(204)
	default:
		apiErr(w, 404, CodeNotFound)
	}
}

func (f *fake) counts() (acquires, releases int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies), f.release
}

// fast makes retries quick.
func fast(cfg *Config) {
	cfg.InitialBackoff = time.Millisecond
	cfg.MaxBackoff = 2 * time.Millisecond
}

func deadEndpoint(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close()
	return addr
}

// The client stays on the endpoint that answered, and moves on only when
// it fails (refused, or no_leader).
func TestFailoverIsSticky(t *testing.T) {
	var mu sync.Mutex
	hits := map[int]int{}
	noLeader := map[int]bool{}
	member := func(id int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[id]++
			down := noLeader[id]
			mu.Unlock()
			if down {
				apiErr(w, 503, CodeNoLeader)
				return
			}
			writeJSON(w, 200, map[string]interface{}{"node_id": id, "leader_id": 2, "term": 1, "members": []interface{}{}})
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	c := newClient(t, []string{deadEndpoint(t), member(2), member(3)}, fast)
	answeredBy := func() uint64 {
		t.Helper()
		st, err := c.Cluster(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.NodeID
	}
	if id := answeredBy(); id != 2 || c.preferred != 1 {
		t.Fatalf("first call answered by %d, preferred %d; want 2 after the dead endpoint", id, c.preferred)
	}
	for i := 0; i < 3; i++ {
		answeredBy()
	}
	mu.Lock()
	if hits[2] != 4 || hits[3] != 0 {
		t.Fatalf("hits %v: the client must stick to member 2", hits)
	}
	noLeader[2] = true
	mu.Unlock()
	if id := answeredBy(); id != 3 || c.preferred != 2 {
		t.Fatalf("after no_leader on 2: answered by %d, preferred %d", id, c.preferred)
	}
	answeredBy()
	mu.Lock()
	defer mu.Unlock()
	if hits[2] != 5 || hits[3] != 2 {
		t.Fatalf("hits %v: one no_leader on 2, then 3 only", hits)
	}
}

// A member that cannot serve (its disk failed or filled up, or it was
// replaced) refused before proposing anything: the client moves on.
func TestAMemberThatCannotServeIsPassedOver(t *testing.T) {
	for _, code := range []string{CodeStorageFailed, CodeDiskFull, CodeMemberReplaced, CodeOverloaded} {
		broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			apiErr(w, 503, code)
		}))
		healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]interface{}{"node_id": 2})
		}))
		c := newClient(t, []string{broken.URL, healthy.URL}, fast)
		st, err := c.Cluster(context.Background())
		broken.Close()
		healthy.Close()
		if err != nil || st.NodeID != 2 || c.preferred != 1 {
			t.Fatalf("%s on the first member: %v, answered by %v, preferred %d", code, err, st, c.preferred)
		}
	}
}

func TestNoLeaderIsRetriedThenReported(t *testing.T) {
	var mu sync.Mutex
	calls, failFirst := 0, 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		fail := calls <= failFirst
		mu.Unlock()
		if fail {
			apiErr(w, 503, CodeNoLeader)
			return
		}
		writeJSON(w, 200, map[string]interface{}{"node_id": 1})
	}))
	defer srv.Close()
	c := newClient(t, []string{srv.URL}, fast)
	if _, err := c.Cluster(context.Background()); err != nil || calls != 3 {
		t.Fatalf("two no_leader then an answer: %v after %d calls", err, calls)
	}
	mu.Lock()
	calls, failFirst = 0, 1000
	mu.Unlock()
	_, err := c.Cluster(context.Background())
	if !errors.Is(err, ErrNoLeader) || calls != c.cfg.Attempts {
		t.Fatalf("always no_leader: %v after %d calls, want ErrNoLeader after %d", err, calls, c.cfg.Attempts)
	}
}

// A wait longer than LongPoll is made of slices; every slice but the last
// carries keep_queued, the last does not, and giving up releases.
func TestLongWaitSlicesKeepTheQueuePlace(t *testing.T) {
	f, url := newFake(t, func(w http.ResponseWriter, r *http.Request, body map[string]interface{}) {
		wait := time.Duration(body["wait_ms"].(float64)) * time.Millisecond
		select {
		case <-time.After(wait):
			apiErr(w, 408, CodeTimeout)
		case <-r.Context().Done():
		}
	})
	c := newClient(t, []string{url}, func(cfg *Config) { cfg.LongPoll = 100 * time.Millisecond })
	s, err := NewSession(context.Background(), c, "slices", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 330*time.Millisecond)
	defer cancel()
	if err := NewMutex(s, "slices").Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want context.DeadlineExceeded", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var kept, last int
	for i, b := range f.bodies {
		wait := b["wait_ms"].(float64)
		keep, has := b["keep_queued"]
		switch {
		case wait == 100 && keep == true:
			kept++
		case wait < 100 && !has:
			last++
		default:
			t.Errorf("slice %d: %v (a full slice must keep its place, a last one must not ask)", i, b)
		}
	}
	if kept < 2 || last < 1 || f.bodies[len(f.bodies)-1]["keep_queued"] != nil {
		t.Errorf("slices %v: want full slices with keep_queued, then a last one without", f.bodies)
	}
	if f.release != 1 {
		t.Errorf("%d releases after giving up, want 1", f.release)
	}
}

// An acquire whose outcome is unknown is released (cancelled) before the
// error is returned, so no node is orphaned.
func TestUnknownAcquireOutcomeIsReleased(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
	}{
		{"outcome_unknown", func(w http.ResponseWriter, r *http.Request) { apiErr(w, 503, CodeOutcomeUnknown) }},
		{"request timeout", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"dropped connection", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, url := newFake(t, func(w http.ResponseWriter, r *http.Request, _ map[string]interface{}) { tc.answer(w, r) })
			c := newClient(t, []string{url}, func(cfg *Config) {
				fast(cfg)
				cfg.Attempts = 2
				cfg.RequestTimeout = 200 * time.Millisecond
			})
			s, err := NewSession(context.Background(), c, "unknown", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			m := NewMutex(s, "unknown")
			for _, try := range []bool{true, false} {
				_, before := f.counts()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				lock := m.Lock
				if try {
					lock = m.TryLock
				}
				err := lock(ctx)
				cancel()
				// A hung acquire that waits (not a try) runs into the
				// caller's deadline before its own timeout.
				want := error(ErrOutcomeUnknown)
				if !try && tc.name == "request timeout" {
					want = context.DeadlineExceeded
				}
				if !errors.Is(err, want) {
					t.Fatalf("lock (try=%v): %v, want %v", try, err, want)
				}
				if _, after := f.counts(); after != before+1 {
					t.Fatalf("%d releases after an unknown outcome, want 1", after-before)
				}
				if m.FencingToken() != 0 {
					t.Fatal("a failed lock left a token")
				}
			}
			if acquires, _ := f.counts(); acquires < 3 {
				t.Fatalf("%d acquire attempts: an unknown outcome must be resent", acquires)
			}
		})
	}
}

func TestConfigEndpoints(t *testing.T) {
	t.Setenv(EndpointsEnv, " http://a:1/ , b:2 ")
	c, err := New(Config{})
	if err != nil || fmt.Sprint(c.Endpoints()) != "[http://a:1 http://b:2]" {
		t.Fatalf("from the environment: %v, %v", c, err)
	}
	t.Setenv(EndpointsEnv, "")
	if c, err := New(Config{}); err != nil || fmt.Sprint(c.Endpoints()) != fmt.Sprint(DefaultEndpoints) {
		t.Fatalf("defaults: %v, %v", c, err)
	}
	for _, bad := range []string{"ftp://a:1", "http://a:1/prefix", "http://"} {
		if _, err := New(Config{Endpoints: []string{bad}}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("endpoint %q: %v, want ErrBadRequest", bad, err)
		}
	}
}
