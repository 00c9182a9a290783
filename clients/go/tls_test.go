package raftlock

// TLS against real clusters (docs/api.md, "TLS"): `raftlock up --tls`
// (HTTPS, a throwaway CA), and three `raftlock serve` members with
// client_auth = "required" on the same certificates.

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.invalid/raftlock/clients/go/internal/testcluster"
)

// refusedWithin bounds how long a refused handshake may take to
// surface: it is not retried.
const refusedWithin = 5 * time.Second

func startCluster(t *testing.T, start func() (*testcluster.Cluster, error)) *testcluster.Cluster {
	t.Helper()
	c, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func plainHTTP(endpoints []string) []string {
	out := make([]string, len(endpoints))
	for i, e := range endpoints {
		out[i] = strings.Replace(e, "https://", "http://", 1)
	}
	return out
}

func noTLSEnv(t *testing.T) {
	t.Setenv(CACertEnv, "")
	t.Setenv(CertEnv, "")
	t.Setenv(KeyEnv, "")
}

func lockOnce(t *testing.T, c *Client) {
	t.Helper()
	m := NewMutex(openSession(t, c, 10*time.Second), uniqueName(t))
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatalf("lock through TLS: %v", err)
	}
	if m.FencingToken() == 0 {
		t.Fatal("no fencing token")
	}
	if err := m.Unlock(testCtx(t)); err != nil {
		t.Fatalf("unlock: %v", err)
	}
}

// expectRefused checks that c fails at once with ErrTLS.
func expectRefused(t *testing.T, c *Client) {
	t.Helper()
	started := time.Now()
	_, err := c.LockState(testCtx(t), uniqueName(t))
	if !errors.Is(err, ErrTLS) {
		t.Fatalf("got %v, want ErrTLS", err)
	}
	if took := time.Since(started); took > refusedWithin {
		t.Fatalf("the refusal took %v", took)
	}
	t.Logf("refused: %v", err)
}

func TestTLS(t *testing.T) {
	noTLSEnv(t)
	up := startCluster(t, func() (*testcluster.Cluster, error) { return testcluster.StartUpTLS(t.TempDir()) })
	ca := filepath.Join(up.TLSDir, "ca.pem")

	t.Run("LockWithTheCA", func(t *testing.T) {
		// http:// endpoints are dialed as https:// with a CA, as the CLI does.
		c := newClient(t, plainHTTP(up.Endpoints), func(cfg *Config) { cfg.CACert = ca })
		if got := strings.Join(c.Endpoints(), ","); got != strings.Join(up.Endpoints, ",") {
			t.Fatalf("endpoints %s, want %s", got, strings.Join(up.Endpoints, ","))
		}
		lockOnce(t, c)
	})

	t.Run("CAFromTheEnvironment", func(t *testing.T) {
		t.Setenv(CACertEnv, ca)
		lockOnce(t, newClient(t, plainHTTP(up.Endpoints), nil))
	})

	t.Run("WithoutTheCAIsRefused", func(t *testing.T) {
		expectRefused(t, newClient(t, up.Endpoints, nil))
	})

	t.Run("PlainHTTPToAnHTTPSMemberIsRefused", func(t *testing.T) {
		expectRefused(t, newClient(t, plainHTTP(up.Endpoints), nil))
	})

	t.Run("ClientAuthRequired", func(t *testing.T) {
		mutual := startCluster(t, func() (*testcluster.Cluster, error) {
			return testcluster.StartMembersTLS(t.TempDir(), up.TLSDir, "required")
		})
		withCert := newClient(t, mutual.Endpoints, func(cfg *Config) {
			cfg.CACert = ca
			cfg.Cert = filepath.Join(up.TLSDir, "client.pem")
			cfg.Key = filepath.Join(up.TLSDir, "client-key.pem")
		})
		lockOnce(t, withCert)
		expectRefused(t, newClient(t, mutual.Endpoints, func(cfg *Config) { cfg.CACert = ca }))
	})
}

func TestTLSSettingsAreChecked(t *testing.T) {
	noTLSEnv(t)
	dir := t.TempDir()
	for _, cfg := range []Config{
		{Cert: "c.pem", Key: "k.pem"},                       // no CA
		{CACert: "ca.pem", Cert: "c.pem"},                   // no key
		{CACert: filepath.Join(dir, "missing.pem")},         // unreadable
		{CACert: "ca.pem", Transport: &countingTransport{}}, // TLS belongs to the transport
	} {
		cfg.Endpoints = []string{"127.0.0.1:1"}
		if _, err := New(cfg); !errors.Is(err, ErrBadRequest) {
			t.Errorf("New(%+v): %v, want ErrBadRequest", cfg, err)
		}
	}
	t.Setenv(CertEnv, "c.pem") // from the environment: still needs a key and a CA
	if _, err := New(Config{Endpoints: []string{"127.0.0.1:1"}}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("$%s alone: %v, want ErrBadRequest", CertEnv, err)
	}
}
