package raftlock

import (
	"testing"
	"time"

	"example.invalid/raftlock/clients/go/internal/testcluster"
)

// The member the client is using, and which leads the cluster, is
// killed (SIGKILL): the client fails over to the others, rides out the
// election, and the session, its lock and new grants carry on.
func TestFailoverWhenTheUsedMemberIsKilled(t *testing.T) {
	cluster, err := testcluster.StartMembers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cluster.Logs())
		}
		cluster.Stop()
	})
	ctx := testCtx(t)
	probe := newClient(t, cluster.Endpoints, nil)
	var leader uint64
	eventually(t, "a leader is known", func() (bool, error) {
		st, err := probe.Cluster(ctx)
		if err == nil {
			leader = st.LeaderID
		}
		return leader != 0, err
	})
	// The leader's endpoint first, so the client is using it.
	endpoints := []string{cluster.Endpoints[leader-1]}
	for i, e := range cluster.Endpoints {
		if uint64(i+1) != leader {
			endpoints = append(endpoints, e)
		}
	}
	c := newClient(t, endpoints, nil)
	s := openSession(t, c, 5*time.Second)
	m := NewMutex(s, uniqueName(t))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.FencingToken()
	if c.preferred != 0 {
		t.Fatalf("client uses endpoint %d, want the leader's (0)", c.preferred)
	}

	if err := cluster.Kill(int(leader)); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("unlock after the leader died: %v", err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("lock after the leader died: %v", err)
	}
	if m.FencingToken() <= before {
		t.Fatalf("token %d after failover, not above %d", m.FencingToken(), before)
	}
	moved := c.preferred
	if moved == 0 {
		t.Fatal("the client still prefers the dead member")
	}
	if _, err := s.Keepalive(ctx); err != nil {
		t.Fatalf("keepalive after failover: %v", err)
	}
	if c.preferred != moved {
		t.Fatalf("the client left endpoint %d, which works, for %d", moved, c.preferred)
	}
	if isDone(s.Done()) {
		t.Fatalf("session lost across the failover: %v", s.Err())
	}
	st, err := m.State(ctx)
	if err != nil || st.Holder == nil || st.Holder.SessionID != s.ID() {
		t.Fatalf("lock state after failover: %+v, %v", st, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
