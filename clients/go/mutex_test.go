package raftlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two sessions on two clients (entering through different members)
// contend for one lock from two goroutines: never both inside, and the
// fencing tokens of successive grants strictly increase.
func TestMutexMutualExclusionAndFencingTokens(t *testing.T) {
	name := uniqueName(t)
	e := shared.Endpoints
	clients := []*Client{
		newClient(t, []string{e[0], e[1], e[2]}, nil),
		newClient(t, []string{e[1], e[2], e[0]}, nil),
	}
	const rounds = 8
	var (
		inside int32
		mu     sync.Mutex
		tokens []uint64
		wg     sync.WaitGroup
		errs   = make(chan error, 2*rounds)
	)
	for w, c := range clients {
		s := openSession(t, c, 10*time.Second)
		m := NewMutex(s, name)
		wg.Add(1)
		go func(w int, c *Client) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				if err := m.Lock(ctx); err != nil {
					cancel()
					errs <- fmt.Errorf("worker %d lock: %w", w, err)
					return
				}
				if !atomic.CompareAndSwapInt32(&inside, 0, 1) {
					errs <- fmt.Errorf("worker %d: two holders at once", w)
				}
				token := m.FencingToken()
				mu.Lock()
				tokens = append(tokens, token)
				mu.Unlock()
				if st, err := c.FencingCheck(ctx, name, token); err != nil || !st.Valid || st.CurrentToken != token {
					errs <- fmt.Errorf("worker %d: fencing check of the holder's token: %+v, %v", w, st, err)
				}
				atomic.StoreInt32(&inside, 0)
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("worker %d unlock: %w", w, err)
				}
				cancel()
			}
		}(w, c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(tokens) != 2*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), 2*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("fencing tokens not strictly increasing: %v", tokens)
		}
	}
	st, err := clients[0].FencingCheck(testCtx(t), name, tokens[len(tokens)-1])
	if err != nil || st.Valid || st.CurrentToken != 0 {
		t.Fatalf("a released token must not be valid: %+v, %v", st, err)
	}
}

func TestTryLock(t *testing.T) {
	ctx := testCtx(t)
	name := uniqueName(t)
	c := newClient(t, nil, nil)
	a := NewMutex(openSession(t, c, 10*time.Second), name)
	b := NewMutex(openSession(t, c, 10*time.Second), name)

	if err := a.TryLock(ctx); err != nil {
		t.Fatalf("free lock: %v", err)
	}
	first := a.FencingToken()
	err := b.TryLock(ctx)
	var apiErr *Error
	if !errors.Is(err, ErrLockHeld) || !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("try-lock of a held lock: %v, want lock_held with status 409", err)
	}
	if b.FencingToken() != 0 {
		t.Fatal("a failed try-lock must not leave a token")
	}
	if err := a.TryLock(ctx); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("try-lock through the holding handle: %v, want lock_held", err)
	}
	st, err := a.State(ctx)
	if err != nil || st.Holder == nil || st.Holder.SessionID != a.Session().ID() || len(st.Waiters) != 0 {
		t.Fatalf("state after a failed try-lock: %+v, %v (want holder a, no waiters)", st, err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("second unlock: %v, want ErrNotLocked", err)
	}
	if err := b.TryLock(ctx); err != nil {
		t.Fatalf("try-lock after release: %v", err)
	}
	if b.FencingToken() <= first {
		t.Fatalf("token %d after %d", b.FencingToken(), first)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// contended returns a, holding a fresh lock, and b, a mutex of the same
// lock through another session bs.
func contended(t *testing.T, ctx context.Context) (a, b *Mutex, bs *Session) {
	t.Helper()
	name := uniqueName(t)
	c := newClient(t, nil, nil)
	a = NewMutex(openSession(t, c, 10*time.Second), name)
	bs = openSession(t, c, 10*time.Second)
	b = NewMutex(bs, name)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	return a, b, bs
}

// A wait that runs out, or is cancelled, withdraws its queued node before
// Lock returns: the lock is never granted to a waiter that left.
func TestLockGivingUpWithdrawsTheWaiter(t *testing.T) {
	ctx := testCtx(t)
	a, b, bs := contended(t, ctx)
	noWaiters := func(when string) {
		t.Helper()
		st, err := a.State(ctx)
		if err != nil || len(st.Waiters) != 0 || st.Holder == nil || st.Holder.SessionID != a.Session().ID() {
			t.Fatalf("%s: state %+v, %v; want a holding and no waiters", when, st, err)
		}
	}

	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	err := b.Lock(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock past its deadline: %v, want context.DeadlineExceeded", err)
	}
	noWaiters("after a deadline")

	wait, cancelWait := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Lock(wait) }()
	eventually(t, "b queued behind a", func() (bool, error) {
		st, err := a.State(ctx)
		return err == nil && len(st.Waiters) == 1 && st.Waiters[0].SessionID == bs.ID(), err
	})
	cancelWait()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled lock: %v, want context.Canceled", err)
	}
	noWaiters("after a cancel")

	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := a.State(ctx)
	if err != nil || st.Holder != nil {
		t.Fatalf("after the holder left, nobody should hold it: %+v, %v", st, err)
	}
}

// A session closed elsewhere ends a waiting Lock at once, with
// ErrSessionLost, and closes Done.
func TestLockEndsWhenSessionIsLost(t *testing.T) {
	ctx := testCtx(t)
	a, b, bs := contended(t, ctx)
	done := make(chan error, 1)
	go func() { done <- b.Lock(ctx) }()
	eventually(t, "b queued", func() (bool, error) {
		st, err := a.State(ctx)
		return err == nil && len(st.Waiters) == 1, err
	})
	if err := bs.Client().CloseSession(ctx, bs.ID()); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, ErrSessionLost) || !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("wait of a closed session: %v, want ErrSessionLost and ErrSessionNotFound", err)
	}
	if !isDone(bs.Done()) {
		t.Fatal("Done must be closed once the cluster said session_not_found")
	}
	if err := b.Lock(ctx); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("lock through a lost session: %v", err)
	}
}

// A lock-delay holds the lock off after the holder's session is closed
// by someone else (another client, through another member): the next
// Lock is granted no earlier than the delay after the close, and State
// shows the lock held off with its delay in between.
func TestLockDelayHoldsOffAfterACloseBySomeoneElse(t *testing.T) {
	ctx := testCtx(t)
	name := uniqueName(t)
	e := shared.Endpoints
	first := newClient(t, []string{e[0], e[1], e[2]}, nil)
	other := newClient(t, []string{e[1], e[2], e[0]}, nil)
	const delay = 1500 * time.Millisecond
	stuck := openSession(t, first, 10*time.Second)
	next := openSession(t, other, 10*time.Second)
	held := NewMutex(stuck, name).WithLockDelay(delay)
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := NewMutex(next, name).WithLockDelay(500 * time.Millisecond).TryLock(ctx); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("another delay while queued: %v, want ErrBadRequest", err)
	}
	closing := time.Now()
	if err := other.CloseSession(ctx, stuck.ID()); err != nil {
		t.Fatal(err)
	}
	waiter := NewMutex(next, name).WithLockDelay(delay)
	st, err := waiter.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.HeldOff || st.Holder != nil || st.LockDelayMS != 1500 {
		t.Fatalf("during the delay: %+v, want held off with lock_delay_ms 1500", st)
	}
	listed, err := other.Locks(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || !listed[0].HeldOff || listed[0].LockDelayMS != 1500 {
		t.Fatalf("listed during the delay: %+v, want one held off with lock_delay_ms 1500", listed)
	}
	if err := waiter.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(closing); took < delay {
		t.Fatalf("granted %v after the close, inside the %v delay", took, delay)
	}
	st, err = waiter.State(ctx)
	if err != nil || st.HeldOff || st.Holder == nil {
		t.Fatalf("after the grant: %+v, %v", st, err)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
