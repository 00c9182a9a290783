package raftlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// next receives the next observed state, failing the test on an error
// event, a closed channel, or after patience.
func next(t *testing.T, events <-chan ObserveEvent) *Leader {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("observe channel closed")
		}
		if ev.Err != nil {
			t.Fatalf("observe: %v", ev.Err)
		}
		return ev.Leader
	case <-time.After(patience):
		t.Fatal("no observe event")
	}
	return nil
}

func TestElection(t *testing.T) {
	ctx := testCtx(t)
	name := uniqueName(t)
	c := newClient(t, nil, nil)
	as, bs := openSession(t, c, 10*time.Second), openSession(t, c, 10*time.Second)
	a, b := NewElection(as, name), NewElection(bs, name)

	observeCtx, stopObserving := context.WithCancel(ctx)
	events := c.Observe(observeCtx, name)
	if l := next(t, events); l != nil {
		t.Fatalf("first event of a new election: %+v, want no leader", l)
	}

	if err := a.Campaign(ctx, "host-a"); err != nil {
		t.Fatal(err)
	}
	if l := next(t, events); l == nil || l.SessionID != as.ID() || l.Value != "host-a" {
		t.Fatalf("after a's campaign: %+v", l)
	}
	firstToken := a.FencingToken()
	if firstToken == 0 {
		t.Fatal("a won without a fencing token")
	}
	if err := a.Campaign(ctx, "host-a"); err != nil || a.FencingToken() != firstToken {
		t.Fatalf("campaign while leading: %v, token %d (want the same grant)", err, a.FencingToken())
	}

	// A candidate that gives up is withdrawn before Campaign returns.
	short, cancel := context.WithTimeout(ctx, time.Second)
	err := b.Campaign(short, "host-b")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("campaign past its deadline: %v", err)
	}

	won := make(chan error, 1)
	go func() { won <- b.Campaign(ctx, "host-b") }()
	if err := b.Proclaim(ctx, "host-b"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("proclaim by a non-leader: %v, want ErrNotLeader", err)
	}
	if err := a.Proclaim(ctx, "host-a2"); err != nil {
		t.Fatal(err)
	}
	if l := next(t, events); l == nil || l.SessionID != as.ID() || l.Value != "host-a2" {
		t.Fatalf("after proclaim: %+v", l)
	}
	// b's candidacy must be queued before a resigns, or a's resignation
	// would show "no leader" first.
	eventually(t, "b is a candidate", func() (bool, error) {
		queue, err := c.Children(ctx, "/elections/"+name)
		return len(queue) == 2, err
	})
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if a.FencingToken() != 0 {
		t.Fatal("a resigned but keeps a token")
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("b was not elected after a resigned")
	}
	if l := next(t, events); l == nil || l.SessionID != bs.ID() || l.Value != "host-b" {
		t.Fatalf("after a resigned: %+v", l)
	}
	if b.FencingToken() <= firstToken {
		t.Fatalf("new leader's token %d not above %d", b.FencingToken(), firstToken)
	}
	if l, err := b.Leader(ctx); err != nil || l == nil || l.SessionID != bs.ID() || l.FencingToken != b.FencingToken() {
		t.Fatalf("Leader: %+v, %v", l, err)
	}
	if err := a.Resign(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("resign by a non-candidate while someone leads: %v, want ErrNotOwner", err)
	}

	stopObserving()
	for range events {
		// Drains until Observe closes the channel.
	}
}
