package raftlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Every API error code maps to its sentinel, and to no other.
func TestEveryCodeHasItsSentinel(t *testing.T) {
	sentinels := map[string]*Error{
		CodeBadRequest: ErrBadRequest, CodeSessionNotFound: ErrSessionNotFound,
		CodeNotFound: ErrNotFound, CodeNotOwner: ErrNotOwner, CodeLockHeld: ErrLockHeld,
		CodeTimeout: ErrTimeout, CodeNoLeader: ErrNoLeader, CodeTooLarge: ErrTooLarge,
		CodeVersionMismatch: ErrVersionMismatch, CodeNotLeader: ErrNotLeader,
		CodeUnsupportedMediaType: ErrUnsupportedMediaType, CodeMethodNotAllowed: ErrMethodNotAllowed,
		CodeWithdrawn: ErrWithdrawn, CodeNotEmpty: ErrNotEmpty, CodeEphemeralParent: ErrEphemeralParent,
		CodeUnauthorized: ErrUnauthorized, CodeForbidden: ErrForbidden,
		CodeSessionConflict: ErrSessionConflict, CodeSequenceExhausted: ErrSequenceExhausted,
		CodeAlreadyGranted: ErrAlreadyGranted, CodeOutcomeUnknown: ErrOutcomeUnknown,
		CodeShuttingDown: ErrShuttingDown, CodeNotCaughtUp: ErrNotCaughtUp, CodeInternal: ErrInternal,
		CodeUnavailable: ErrUnavailable, CodeProtocol: ErrProtocol,
	}
	for code, sentinel := range sentinels {
		body := fmt.Sprintf(`{"error":%q,"message":"text of %s"}`, code, code)
		var err error = errorOf(418, []byte(body))
		err = fmt.Errorf("wrapped: %w", err)
		for other, s := range sentinels {
			if got := errors.Is(err, s); got != (other == code) {
				t.Errorf("errors.Is(%s error, sentinel of %s) = %v", code, other, got)
			}
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != code || e.Status != 418 || e.Message != "text of "+code {
			t.Errorf("errors.As of %s: %+v", code, e)
		}
		if sentinel.Code != code {
			t.Errorf("sentinel of %s has code %s", code, sentinel.Code)
		}
	}
	if e := errorOf(502, []byte("<html>")); e.Code != CodeOutcomeUnknown || !e.OutcomeUnknown() {
		t.Errorf("a proxy's 502 page: %+v, want outcome_unknown", e)
	}
	if e := errorOf(404, []byte("nope")); e.Code != CodeProtocol {
		t.Errorf("a 404 that is not ours: %+v, want protocol", e)
	}
}

// Typed errors as a real cluster answers them.
func TestTypedErrorsFromTheCluster(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, nil)
	name := uniqueName(t)
	var e *Error

	if _, err := c.Keepalive(ctx, strings.Repeat("0", 32)); !errors.Is(err, ErrSessionNotFound) || !errors.As(err, &e) || e.Status != 404 {
		t.Errorf("keepalive of an unknown session: %v", err)
	}
	if _, _, err := c.OpenSession(ctx, "x", 10*time.Millisecond); !errors.Is(err, ErrBadRequest) || !errors.As(err, &e) || e.Status != 400 {
		t.Errorf("TTL below the minimum: %v", err)
	}
	// Refused before sending: Status 0.
	if err := NewMutex(openSession(t, c, 10*time.Second), "bad/../name").Lock(ctx); !errors.Is(err, ErrBadRequest) || !errors.As(err, &e) || e.Status != 0 {
		t.Errorf("bad lock name: %v", err)
	}
	a := openSession(t, c, 10*time.Second)
	b := openSession(t, c, 10*time.Second)
	if err := c.Release(ctx, name, b.ID()); !errors.Is(err, ErrNotFound) {
		t.Errorf("release of a free lock: %v, want ErrNotFound", err)
	}
	if _, err := c.Acquire(ctx, name, a.ID(), AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, name, b.ID()); !errors.Is(err, ErrNotOwner) || !errors.As(err, &e) || e.Status != 403 {
		t.Errorf("release of another session's lock: %v, want ErrNotOwner", err)
	}
	if _, err := c.Acquire(ctx, name, b.ID(), AcquireOptions{Wait: 200 * time.Millisecond}); !errors.Is(err, ErrTimeout) || !errors.As(err, &e) || e.Status != 408 {
		t.Errorf("acquire that times out: %v, want ErrTimeout", err)
	}
	if _, _, err := c.PutNode(ctx, "/"+name, make([]byte, 600<<10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("600 KiB of node data: %v, want ErrTooLarge", err)
	}
	if _, _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/locks/" + name + "/bogus", body: sessionOnly{a.ID()}}); !errors.Is(err, ErrMethodNotAllowed) {
		t.Errorf("unknown action: %v, want ErrMethodNotAllowed", err)
	}
	if _, err := c.GetNode(ctx, "/x", IfVersion(1)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("an option that does not apply: %v", err)
	}

	// Nothing listens: never delivered, ErrUnavailable.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	down := newClient(t, []string{dead}, func(cfg *Config) { cfg.Attempts = 2 })
	if _, err := down.Cluster(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no member reachable: %v, want ErrUnavailable", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Cluster(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// The client classifies codes with the contract's table (codes_gen.go,
// generated from raftlock-api's ErrorCode), not with lists of its own.
func TestErrorClassesFollowTheContractTable(t *testing.T) {
	for _, code := range []string{CodeStorageFailed, CodeDiskFull, CodeMemberReplaced, CodeOverloaded} {
		if !codeRetryElsewhere(code) || !codeNotApplied(code) {
			t.Errorf("%s: another member serves, nothing applied", code)
		}
	}
	if !codeRetryElsewhere(CodeShuttingDown) || codeNotApplied(CodeShuttingDown) {
		t.Errorf("shutting_down: another member serves, but it may have applied")
	}
	for _, code := range []string{CodeOutcomeUnknown, CodeInternal, CodeShuttingDown, CodeProtocol} {
		if !(&Error{Code: code}).OutcomeUnknown() {
			t.Errorf("%s: the outcome is unknown", code)
		}
	}
	for _, code := range []string{CodeNotCaughtUp, CodeLockHeld, CodeNoLeader, CodeUnavailable} {
		if (&Error{Code: code}).OutcomeUnknown() {
			t.Errorf("%s: a definite answer", code)
		}
	}
	if !codeRetryLater(CodeTooManyRequests) || codeRetryLater(CodeLockHeld) {
		t.Errorf("too_many_requests passes by itself; lock_held does not")
	}
	if codeStatus(CodeTooManyRequests) != 429 || codeStatus(CodeInternal) != 500 || codeStatus("frobnicated") != 0 {
		t.Errorf("statuses do not follow the table")
	}
}
