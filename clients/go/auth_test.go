package raftlock

// The bearer token (Config.Token, $RAFTLOCK_TOKEN) against a fake server
// that checks it, as a cluster with [[auth.tokens]] does.

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// tokenServer answers 401 unless the request carries "Bearer secret";
// with it, a lock held by another principal (no session id).
func tokenServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			apiErr(w, 401, CodeUnauthorized)
			return
		}
		writeJSON(w, 200, map[string]interface{}{
			"lock": "shared/x",
			"holder": map[string]interface{}{
				"session_id": nil, "owner": "w", "principal": "alice",
				"node": "/locks/shared/x/lock-0000000003", "fencing_token": 3, "since_revision": 3,
			},
			"waiters": []interface{}{},
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestTheTokenIsSentFromConfigOrEnvironment(t *testing.T) {
	url := tokenServer(t)
	t.Setenv(TokenEnv, "")
	anonymous := newClient(t, []string{url}, fast)
	if _, err := anonymous.LockState(testCtx(t), "shared/x"); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("without a token: %v, want ErrUnauthorized", err)
	}
	configured := newClient(t, []string{url}, func(c *Config) { fast(c); c.Token = " secret\n" })
	state, err := configured.LockState(testCtx(t), "shared/x")
	if err != nil {
		t.Fatalf("with Config.Token: %v", err)
	}
	if h := state.Holder; h == nil || h.SessionID != "" || h.Principal != "alice" {
		t.Fatalf("another principal's holder: %+v", h)
	}
	t.Setenv(TokenEnv, "secret")
	fromEnv := newClient(t, []string{url}, fast)
	if _, err := fromEnv.LockState(testCtx(t), "shared/x"); err != nil {
		t.Fatalf("with $%s: %v", TokenEnv, err)
	}
}
