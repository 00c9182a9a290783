package raftlock

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEndpoints are the members `raftlock up` starts by default.
var DefaultEndpoints = []string{"http://127.0.0.1:7001", "http://127.0.0.1:7002", "http://127.0.0.1:7003"}

// EndpointsEnv names the environment variable read when Config.Endpoints
// is empty: a comma-separated list, as for the raftlock CLI.
const EndpointsEnv = "RAFTLOCK_ENDPOINTS"

// TokenEnv names the environment variable read when Config.Token is
// empty, as for the raftlock CLI.
const TokenEnv = "RAFTLOCK_TOKEN"

// Config configures a Client. The zero value works against `raftlock up`
// on this host; every zero field takes the documented default.
type Config struct {
	// Endpoints are the members' API base URLs ("http://10.0.0.1:7001";
	// a bare "host:port" means http, https with CACert). Empty: the
	// comma-separated list in $RAFTLOCK_ENDPOINTS, or DefaultEndpoints
	// when that is unset.
	Endpoints []string
	// RequestTimeout bounds one attempt of a request that does not
	// long-poll; an acquire or campaign gets its wait on top, so the
	// server's own timeout answer arrives first. Default 10 s: above the
	// servers' leader_wait_ms (3 s) plus a commit.
	RequestTimeout time.Duration
	// ConnectTimeout bounds a TCP connect; a member that does not accept
	// in time counts as down. Default 1 s.
	ConnectTimeout time.Duration
	// Attempts per request, the first included, across endpoints.
	// Default 6.
	Attempts int
	// InitialBackoff is the pause before the second attempt; it doubles
	// with each attempt up to MaxBackoff, and each pause is scaled by a
	// random factor in [0.5, 1] so clients that failed together do not
	// retry together. Defaults 50 ms and 1 s: about 1.5 s in all, enough
	// to ride out a Raft election.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// LongPoll is the longest single acquire or campaign; longer waits
	// are made of several (the server caps one wait, by default at
	// 5 min). Default 60 s.
	LongPoll time.Duration
	// ObserveIdleTimeout: an observe stream silent for this long is
	// reconnected (servers send a comment every 15 s). Default 60 s.
	ObserveIdleTimeout time.Duration
	// Transport, if set, carries every request (for custom TLS, proxies,
	// or instrumentation); it then also owns TLS, and CACert, Cert and
	// Key must be empty (their environment variables are not read).
	// Default: a transport with ConnectTimeout, no proxy, and the TLS
	// of CACert, Cert and Key.
	Transport http.RoundTripper
	// Token is the bearer token for a cluster that defines tokens (sent
	// as "Authorization: Bearer"; without it such a cluster answers
	// ErrUnauthorized). Empty: $RAFTLOCK_TOKEN, or none when unset.
	Token string
	// CACert is the PEM file of the CA that signed the cluster's
	// certificates (its [tls] ca, or the ca.pem `raftlock up --tls`
	// prints). Set, only that CA is trusted and every endpoint is dialed
	// as https, http:// ones and the defaults too, as the CLI does with
	// --cacert. Empty: $RAFTLOCK_CACERT; when that is unset too, https
	// endpoints are checked against the system's trust store.
	CACert string
	// Cert and Key are the PEM files of a client certificate and its
	// key, for a cluster with client_auth; they need CACert. Empty:
	// $RAFTLOCK_CERT and $RAFTLOCK_KEY.
	Cert string
	Key  string
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.RequestTimeout, 10*time.Second)
	def(&c.ConnectTimeout, time.Second)
	def(&c.InitialBackoff, 50*time.Millisecond)
	def(&c.MaxBackoff, time.Second)
	def(&c.LongPoll, 60*time.Second)
	def(&c.ObserveIdleTimeout, 60*time.Second)
	if c.Attempts <= 0 {
		c.Attempts = 6
	}
	if c.Token == "" {
		c.Token = os.Getenv(TokenEnv)
	}
	c.Token = strings.TrimSpace(c.Token)
	return c
}

// Client talks to a raftlock cluster over its HTTP API. It is safe for
// concurrent use; create one per cluster and share it.
//
// Failover: any member serves any request (followers forward writes to
// the leader), so the client sticks to the endpoint that last answered
// and moves on to the next only when that one fails. A request that was
// never delivered (connection refused, connect timeout) or was answered
// no_leader or shutting_down changed nothing and is retried on the next
// endpoint after a backoff; so is one answered storage_failed, disk_full,
// member_replaced or overloaded by a member that cannot serve. A request whose
// answer was lost after it was sent (timeout, reset, outcome_unknown) is
// resent too, as every session,
// lock and election request is safe to resend (an acquire or campaign of
// the same session returns the same node; release, resign and close aim
// at a state a second try reaches too); node writes (PutNode, DeleteNode)
// are not, and stop at the first such loss. When the attempts run out
// after a loss the error is ErrOutcomeUnknown, never a definite one.
type Client struct {
	endpoints []string
	http      *http.Client
	cfg       Config
	// preferred is the index of the endpoint that answered last.
	preferred int32

	randMu sync.Mutex
	rand   *rand.Rand
}

// New returns a client for cfg's endpoints. It sends nothing.
//
// A failed TLS handshake (a server certificate CACert did not sign, a
// cluster refusing the client's certificate or its lack of one) fails a
// request at once with ErrTLS: every member would answer the same.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	var tlsConfig *tls.Config
	if cfg.Transport != nil {
		if cfg.CACert != "" || cfg.Cert != "" || cfg.Key != "" {
			return nil, apiError(CodeBadRequest, "CACert, Cert and Key are for the default transport: configure TLS in Config.Transport")
		}
	} else {
		if err := cfg.tlsFiles(); err != nil {
			return nil, err
		}
		var err error
		if tlsConfig, err = cfg.tlsConfig(); err != nil {
			return nil, err
		}
	}
	raw := cfg.Endpoints
	if len(raw) == 0 {
		if env := os.Getenv(EndpointsEnv); strings.TrimSpace(env) != "" {
			raw = ParseEndpoints(env)
		} else {
			raw = DefaultEndpoints
		}
	}
	endpoints := make([]string, 0, len(raw))
	for _, e := range raw {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		e = httpsEndpoint(e, cfg.CACert != "")
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, apiError(CodeBadRequest, "endpoint %q is not an http(s)://host:port base URL", e)
		}
		endpoints = append(endpoints, u.Scheme+"://"+u.Host)
	}
	if len(endpoints) == 0 {
		return nil, apiError(CodeBadRequest, "no endpoints given")
	}
	transport := cfg.Transport
	if transport == nil {
		transport = &http.Transport{
			Proxy: nil,
			DialContext: (&net.Dialer{
				Timeout:   cfg.ConnectTimeout,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: cfg.RequestTimeout,
			MaxIdleConns:        100,
			MaxIdleConnsPerHost: 32,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	return &Client{
		endpoints: endpoints,
		http:      &http.Client{Transport: transport},
		cfg:       cfg,
		rand:      rand.New(rand.NewSource(time.Now().UnixNano())),
	}, nil
}

// authorize adds the bearer token, if any, to req.
func (c *Client) authorize(req *http.Request) {
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
}

// ParseEndpoints splits a comma-separated endpoint list, as in
// RAFTLOCK_ENDPOINTS=http://a:7001,http://b:7001.
func ParseEndpoints(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Endpoints returns the endpoints in configured order.
func (c *Client) Endpoints() []string {
	return append([]string(nil), c.endpoints...)
}

// Close releases idle connections. Sessions of this client should be
// closed first.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
}

// backoff is the pause before attempt (0-based; none before the first).
func (c *Client) backoff(attempt int) time.Duration {
	if attempt <= 0 {
		return 0
	}
	full := c.cfg.InitialBackoff
	for i := 1; i < attempt && full < c.cfg.MaxBackoff; i++ {
		full *= 2
	}
	if full > c.cfg.MaxBackoff {
		full = c.cfg.MaxBackoff
	}
	c.randMu.Lock()
	f := 0.5 + 0.5*c.rand.Float64()
	c.randMu.Unlock()
	return time.Duration(float64(full) * f)
}

// call is one API request as the retry loop needs it.
type call struct {
	method string
	path   string // with the query, if any
	body   interface{}
	// wait is the server-side wait of a long poll; it extends the
	// per-attempt timeout.
	wait time.Duration
	// goneIsDone: for release-like calls, after an attempt whose outcome
	// is unknown, "already gone" means that attempt worked.
	goneIsDone bool
	// revision, when set, receives the Raftlock-Revision header of the
	// answer (the revision a node read saw).
	revision *uint64
	// noResend: the write is not safe to send twice (a node write could
	// land twice, or over someone else's); after an attempt whose outcome
	// is unknown the call stops with ErrOutcomeUnknown.
	noResend bool
}

// do runs cl with failover and retries; it returns the status and body
// of a 2xx answer.
func (c *Client) do(ctx context.Context, cl call) (int, []byte, error) {
	var payload []byte
	if cl.body != nil {
		var err error
		if payload, err = json.Marshal(cl.body); err != nil {
			return 0, nil, apiError(CodeBadRequest, "encoding the request: %v", err)
		}
	}
	write := cl.method != http.MethodGet
	n := len(c.endpoints)
	start := int(atomic.LoadInt32(&c.preferred))
	// unknown is set once a write may have been applied.
	var unknown *Error
	var last *Error
	// failed records a failed attempt and reports whether to stop: a
	// write that may have been applied must not be resent when noResend.
	failed := func(e *Error, maybeApplied bool) bool {
		if maybeApplied && write {
			unknown = e
			return cl.noResend
		}
		last = e
		return false
	}
attempts:
	for attempt := 0; attempt < c.cfg.Attempts; attempt++ {
		if err := sleepCtx(ctx, c.backoff(attempt)); err != nil {
			return 0, nil, gaveUp(cl, ctx.Err(), unknown)
		}
		index := (start + attempt) % n
		endpoint := c.endpoints[index]
		status, body, sent, err := c.attempt(ctx, endpoint, cl, payload)
		if why := tlsError(err); why != "" {
			return 0, nil, &Error{Code: CodeTLS, Message: endpoint + ": " + why, Err: err}
		}
		if err != nil {
			if ctx.Err() != nil {
				if sent && write {
					unknown = &Error{Code: CodeOutcomeUnknown, Message: endpoint + ": no answer", Err: err}
				}
				return 0, nil, gaveUp(cl, ctx.Err(), unknown)
			}
			e := &Error{Code: CodeUnavailable, Message: endpoint + ": " + err.Error(), Err: err}
			if sent && write {
				e.Code = CodeOutcomeUnknown
			}
			if failed(e, sent) {
				break attempts
			}
			continue
		}
		if status >= 200 && status < 300 {
			atomic.StoreInt32(&c.preferred, int32(index))
			return status, body, nil
		}
		e := errorOf(status, body)
		switch {
		case e.Code == CodeNoLeader || codeRetryElsewhere(e.Code) && codeNotApplied(e.Code):
			// Refused before anything was proposed: another member may serve.
			failed(e, false)
			continue
		case codeOutcomeUnknown(e.Code):
			// A member going down may have applied (or queued) a write:
			// resend it elsewhere.
			if failed(e, true) {
				break attempts
			}
			continue
		}
		atomic.StoreInt32(&c.preferred, int32(index))
		if cl.goneIsDone && unknown != nil && alreadyGone(e) {
			return http.StatusNoContent, nil, nil
		}
		return 0, nil, e
	}
	if unknown != nil {
		if unknown.Code != CodeOutcomeUnknown {
			return 0, nil, &Error{Code: CodeOutcomeUnknown, Status: unknown.Status, Message: "the request may have been applied", Err: unknown}
		}
		return 0, nil, unknown
	}
	if last == nil {
		last = apiError(CodeUnavailable, "no attempt made")
	}
	return 0, nil, last
}

// gaveUp is the error of a call abandoned because its context ended.
func gaveUp(cl call, ctxErr error, unknown *Error) error {
	if unknown != nil {
		return &Error{
			Code:    CodeOutcomeUnknown,
			Message: fmt.Sprintf("%s %s abandoned after it was sent; it may have been applied", cl.method, cl.path),
			Err:     ctxErr,
		}
	}
	return fmt.Errorf("raftlock: %s %s: %w", cl.method, cl.path, ctxErr)
}

// attempt sends cl once to endpoint. sent is false when the request
// cannot have been delivered (the connection was never made).
func (c *Client) attempt(ctx context.Context, endpoint string, cl call, payload []byte) (status int, body []byte, sent bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout+cl.wait)
	defer cancel()
	var reader io.Reader
	if payload != nil {
		reader = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, endpoint+cl.path, reader)
	if err != nil {
		return 0, nil, false, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, !notDelivered(err), err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, true, fmt.Errorf("reading the answer: %w", err)
	}
	if cl.revision != nil {
		if r, err := strconv.ParseUint(resp.Header.Get("Raftlock-Revision"), 10, 64); err == nil {
			*cl.revision = r
		}
	}
	return resp.StatusCode, body, true, nil
}

// notDelivered reports whether err says the connection was never made.
func notDelivered(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// errorOf maps a non-2xx answer to an *Error. A body that is not the
// API's error JSON (a proxy's page) is a protocol error, or an unknown
// outcome for a 5xx since the request may have gone through.
func errorOf(status int, body []byte) *Error {
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return &Error{Code: e.Error, Status: status, Message: e.Message}
	}
	text := string(body)
	if len(text) > 200 {
		text = text[:200]
	}
	code := CodeProtocol
	if status >= 500 {
		code = CodeOutcomeUnknown
	}
	return &Error{Code: code, Status: status, Message: fmt.Sprintf("HTTP %d: %s", status, text)}
}

// decode parses a 2xx answer; a shape we do not understand is
// ErrProtocol.
func decode(body []byte, v interface{}) error {
	if err := json.Unmarshal(body, v); err != nil {
		text := string(body)
		if len(text) > 200 {
			text = text[:200]
		}
		return &Error{Code: CodeProtocol, Message: fmt.Sprintf("%v in %q", err, text), Err: err}
	}
	return nil
}

// sleepCtx pauses for d, or until ctx ends (then returns its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// millis is d in whole milliseconds, rounded up so a wait never ends
// before d.
func millis(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Millisecond - 1) / time.Millisecond)
}
