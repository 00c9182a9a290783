package raftlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Locked twice, the lock stays held after one Unlock (another session
// cannot take it) and is free after the second (the other session gets
// it); the count is per handle.
func TestReentrantMutexReleasesWhenTheCountReturnsToZero(t *testing.T) {
	name := uniqueName(t)
	c := newClient(t, nil, nil)
	holder := NewReentrantMutex(openSession(t, c, 10*time.Second), name)
	other := NewMutex(openSession(t, c, 10*time.Second), name)
	ctx := testCtx(t)

	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("first lock: %v", err)
	}
	token := holder.FencingToken()
	// A re-entry must not queue: bound it well below patience.
	reenter, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := holder.Lock(reenter); err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if err := holder.TryLock(reenter); err != nil {
		t.Fatalf("re-entry by TryLock: %v", err)
	}
	if n, tok := holder.HoldCount(), holder.FencingToken(); n != 3 || tok != token {
		t.Fatalf("hold count %d, token %d; want 3 and %d", n, tok, token)
	}

	for i := 0; i < 2; i++ {
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("unlock %d: %v", i+1, err)
		}
		if err := other.TryLock(ctx); !errors.Is(err, ErrLockHeld) {
			t.Fatalf("after %d of 3 unlocks another session's TryLock: %v, want ErrLockHeld", i+1, err)
		}
		st, err := holder.State(ctx)
		if err != nil || st.Holder == nil || st.Holder.FencingToken != token {
			t.Fatalf("after %d of 3 unlocks the holder is %+v (%v), want token %d", i+1, st, err, token)
		}
	}

	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("last unlock: %v", err)
	}
	if n := holder.HoldCount(); n != 0 {
		t.Fatalf("hold count %d after the last unlock", n)
	}
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("another session after the last unlock: %v", err)
	}
	if other.FencingToken() <= token {
		t.Fatalf("new token %d not above %d", other.FencingToken(), token)
	}
	if err := holder.Unlock(ctx); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("unlock with no hold left: %v, want ErrNotLocked", err)
	}
	// Not held by this handle: TryLock queues as a Mutex's does.
	if err := holder.TryLock(ctx); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("TryLock of a lock held elsewhere: %v, want ErrLockHeld", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
