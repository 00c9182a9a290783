package raftlock

// TLS to a cluster with a [tls] table (docs/api.md, "TLS"): the CA to
// trust and, for client_auth, a client certificate, given as PEM file
// paths as to the CLI's --cacert/--cert/--key.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
)

// The environment variables read for an empty Config.CACert, Cert and
// Key, as for the raftlock CLI.
const (
	CACertEnv = "RAFTLOCK_CACERT"
	CertEnv   = "RAFTLOCK_CERT"
	KeyEnv    = "RAFTLOCK_KEY"
)

// tlsFiles fills CACert, Cert and Key from the environment where empty,
// and checks they go together.
func (c *Config) tlsFiles() error {
	env := func(field *string, name string) {
		if *field == "" {
			*field = strings.TrimSpace(os.Getenv(name))
		}
	}
	env(&c.CACert, CACertEnv)
	env(&c.Cert, CertEnv)
	env(&c.Key, KeyEnv)
	if (c.Cert == "") != (c.Key == "") {
		return apiError(CodeBadRequest, "Cert and Key go together: give both or neither")
	}
	if c.Cert != "" && c.CACert == "" {
		return apiError(CodeBadRequest, "Cert needs CACert (the CA that signed the cluster's certificates)")
	}
	return nil
}

// tlsConfig trusts only CACert and presents Cert/Key when given; nil
// (the system's trust store for https endpoints) without CACert.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if c.CACert == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.CACert)
	if err != nil {
		return nil, apiError(CodeBadRequest, "CACert: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, apiError(CodeBadRequest, "CACert %s: no PEM certificate in it", c.CACert)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, apiError(CodeBadRequest, "Cert %s / Key %s: %v", c.Cert, c.Key, err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

// httpsEndpoint is the CLI's rule: with a CA file every endpoint is
// dialed as https, http:// ones and bare host:port ones too.
func httpsEndpoint(e string, withCA bool) string {
	if !strings.Contains(e, "://") {
		e = "http://" + e
	}
	if withCA && strings.HasPrefix(e, "http://") {
		e = "https://" + strings.TrimPrefix(e, "http://")
	}
	return e
}

// tlsFailure describes err if it is a failed TLS handshake, else "": a
// server certificate the client does not trust, the server refusing the
// client's certificate (or its lack of one) with an alert, a server that
// does not speak TLS, or a plain-HTTP request answered with a TLS alert
// (an HTTPS member dialed as http:// without CACert). The server reads no
// request before its handshake finishes, so nothing was applied; and
// every member would fail the same way, so it is not retried.
func tlsFailure(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record) {
		return "TLS handshake failed"
	}
	// crypto/tls reports the peer's alert as a *net.OpError with this Op.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && strings.HasPrefix(op.Err.Error(), "tls: ") {
		return "TLS handshake failed"
	}
	// net/http quotes the first line of an answer it cannot parse; a TLS
	// alert record starts with 0x15 0x03 (Go 1.19 gives no typed error).
	if strings.Contains(err.Error(), `malformed HTTP response "\x15\x03`) {
		return "the member answered with a TLS alert: it serves HTTPS, set Config.CACert (or $" + CACertEnv + ")"
	}
	return ""
}

// tlsError is tlsFailure of a possibly nil error.
func tlsError(err error) string {
	if err == nil {
		return ""
	}
	return tlsFailure(err)
}
