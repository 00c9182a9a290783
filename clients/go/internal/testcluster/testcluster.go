// Package testcluster starts real three-member raftlock clusters on
// loopback for tests: `raftlock up` (as a user would), or three
// `raftlock serve` processes when a test must kill a single member
// (`raftlock up` stops the whole cluster when one member exits).
//
// Ports are picked below the kernel's ephemeral range, so no outgoing
// connection of this machine can take one between the check and the
// member's bind; a start that still loses a port is retried with others.
// Every process started here is stopped by Stop, and is also signalled
// by the kernel if the test binary dies first (Pdeathsig).
package testcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Patience bounds anything a test waits for: a failure bound, never a
// synchronisation device.
const Patience = 60 * time.Second

// Cluster is three raftlock members on loopback.
type Cluster struct {
	// Endpoints are the members' API base URLs, member 1 first.
	Endpoints []string
	// Dir holds the config, the members' data and their logs.
	Dir string
	// TLSDir holds ca.pem, member.pem, client.pem and their keys (as
	// `raftlock up --tls` makes them) for a cluster serving HTTPS; empty
	// for plain HTTP.
	TLSDir string
	// clientAuth is the [tls] client_auth of a members-mode TLS cluster.
	clientAuth string
	// up is the `raftlock up` process (nil in members mode).
	up *proc
	// members are the `raftlock serve` processes (members mode only).
	members []*proc
	bin     string
}

// proc is a child process and its exit.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Binary is the raftlock binary to test: $RAFTLOCK_BIN, else
// target/debug/raftlock of the repository around the working directory.
func Binary() (string, error) {
	if bin := os.Getenv("RAFTLOCK_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isFile(filepath.Join(dir, "Cargo.toml")) && isDir(filepath.Join(dir, "crates")) {
			bin := filepath.Join(dir, "target", "debug", "raftlock")
			if !isFile(bin) {
				return "", fmt.Errorf("%s does not exist: build it (cargo build -p raftlock-cli) or set RAFTLOCK_BIN", bin)
			}
			return bin, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no raftlock repository above the working directory: set RAFTLOCK_BIN")
		}
		dir = parent
	}
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }
func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }

// StartUp starts `raftlock up --data-dir <dir>/... --base-port <free>`
// and waits until every member is healthy.
func StartUp(dir string) (*Cluster, error) {
	return start(dir, true, nil)
}

// StartUpTLS is StartUp with --tls: HTTPS with a throwaway CA, whose
// files are in the cluster's TLSDir.
func StartUpTLS(dir string) (*Cluster, error) {
	return start(dir, true, &Cluster{TLSDir: "tls", clientAuth: "none"})
}

// StartMembers starts three `raftlock serve` processes with the config
// `raftlock up` would write, so single members can be killed.
func StartMembers(dir string) (*Cluster, error) {
	return start(dir, false, nil)
}

// StartMembersTLS is StartMembers serving HTTPS with the certificates in
// tlsDir (as StartUpTLS makes them) and [tls] client_auth = clientAuth.
func StartMembersTLS(dir, tlsDir, clientAuth string) (*Cluster, error) {
	abs, err := filepath.Abs(tlsDir)
	if err != nil {
		return nil, err
	}
	return start(dir, false, &Cluster{TLSDir: abs, clientAuth: clientAuth})
}

// start starts a cluster; withTLS, if set, carries TLSDir (relative: inside
// the cluster's directory) and clientAuth.
func start(dir string, up bool, withTLS *Cluster) (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for try := 1; try <= 5; try++ {
		base, err := freeBase()
		if err != nil {
			return nil, err
		}
		c := &Cluster{Dir: filepath.Join(dir, fmt.Sprintf("cluster-%d", try)), bin: bin}
		scheme := "http"
		if withTLS != nil {
			scheme = "https"
			c.TLSDir, c.clientAuth = withTLS.TLSDir, withTLS.clientAuth
			if !filepath.IsAbs(c.TLSDir) {
				c.TLSDir = filepath.Join(c.Dir, c.TLSDir)
			}
		}
		for i := 0; i < 3; i++ {
			c.Endpoints = append(c.Endpoints, fmt.Sprintf("%s://127.0.0.1:%d", scheme, base+i))
		}
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return nil, err
		}
		if up {
			err = c.startUp(base)
		} else {
			err = c.startMembers(base)
		}
		if err == nil {
			err = c.waitHealthy()
		}
		if err == nil {
			return c, nil
		}
		logs := c.Logs()
		c.Stop()
		lastErr = fmt.Errorf("%v\n%s", err, logs)
		if !strings.Contains(logs, "in use") && !strings.Contains(logs, "cannot listen") {
			return nil, lastErr
		}
		// Someone took a port between our check and the bind: again.
	}
	return nil, lastErr
}

// freeBase picks a base port P with P..P+2 (APIs), P+100..P+102 (Raft),
// P+200..P+202 (ZooKeeper) and P+300..P+302 (etcd) free, below the
// ephemeral range.
func freeBase() (int, error) {
	const lowest = 10000
	below := 32768
	if text, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(text)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				below = n
			}
		}
	}
	if below-303 <= lowest+1000 {
		below = 65535
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano() ^ int64(os.Getpid())))
	for i := 0; i < 500; i++ {
		base := lowest + rng.Intn(below-303-lowest)
		if portsFree(base, base+1, base+2, base+100, base+101, base+102,
			base+200, base+201, base+202, base+300, base+301, base+302) {
			return base, nil
		}
	}
	return 0, errors.New("no free run of loopback ports found")
}

func portsFree(ports ...int) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, p := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		held = append(held, l)
	}
	return true
}

func (c *Cluster) startUp(base int) error {
	log, err := os.Create(filepath.Join(c.Dir, "up.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"up", "--data-dir", c.Dir, "--base-port", strconv.Itoa(base)}
	if c.TLSDir != "" {
		args = append(args, "--tls") // writes its certificates to c.Dir/tls
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so Stop can end the members too if `up`
	// does not stop them; SIGTERM (`up` stops all three) if we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	c.up, err = run(cmd)
	return err
}

func (c *Cluster) startMembers(base int) error {
	var config strings.Builder
	config.WriteString("[cluster]\ndata_dir = \".\"\n")
	if c.TLSDir != "" {
		fmt.Fprintf(&config, "\n[tls]\nca = %q\ncert = %q\nkey = %q\nclient_auth = %q\n",
			filepath.Join(c.TLSDir, "ca.pem"), filepath.Join(c.TLSDir, "member.pem"),
			filepath.Join(c.TLSDir, "member-key.pem"), c.clientAuth)
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&config, "\n[[members]]\nid = %d\napi_addr = \"127.0.0.1:%d\"\nraft_addr = \"127.0.0.1:%d\"\n", i+1, base+i, base+100+i)
	}
	path := filepath.Join(c.Dir, "cluster.toml")
	if err := os.WriteFile(path, []byte(config.String()), 0o644); err != nil {
		return err
	}
	for id := 1; id <= 3; id++ {
		log, err := os.OpenFile(filepath.Join(c.Dir, fmt.Sprintf("node-%d.log", id)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command(c.bin, "serve", "--config", path, "--id", strconv.Itoa(id))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		p, err := run(cmd)
		log.Close()
		if err != nil {
			return err
		}
		c.members = append(c.members, p)
	}
	return nil
}

// run starts cmd from a goroutine locked to its OS thread until the
// process exits: Pdeathsig fires when the *thread* that started a child
// ends, and Go may otherwise retire that thread while the child runs.
func run(cmd *exec.Cmd) (*proc, error) {
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// waitHealthy polls every member's /v1/health until all answer 200.
func (c *Cluster) waitHealthy() error {
	deadline := time.Now().Add(Patience)
	for {
		if c.up != nil && !c.up.running() {
			return fmt.Errorf("raftlock up exited during start-up: %v", c.up.err)
		}
		for i, m := range c.members {
			if !m.running() {
				return fmt.Errorf("member %d exited during start-up: %v", i+1, m.err)
			}
		}
		healthy := 0
		for _, e := range c.Endpoints {
			if c.healthy(e) {
				healthy++
			}
		}
		if healthy == len(c.Endpoints) && c.upReady() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster was not healthy within %v", Patience)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a condition
	}
}

// upReady reports whether `up` has said its last start-up line, after
// which it handles SIGTERM by stopping its members (members mode: true).
func (c *Cluster) upReady() bool {
	if c.up == nil {
		return true
	}
	log, _ := os.ReadFile(filepath.Join(c.Dir, "up.log"))
	return bytes.Contains(log, []byte("Ctrl-C stops all "))
}

// healthy reports whether the member at endpoint answers /v1/health 200
// (over TLS trusting TLSDir's CA and presenting its client certificate).
func (c *Cluster) healthy(endpoint string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/v1/health", nil)
	if err != nil {
		return false
	}
	client := http.DefaultClient
	if c.TLSDir != "" {
		config, err := c.clientTLS()
		if err != nil {
			return false // `raftlock up --tls` has not written its files yet
		}
		transport := &http.Transport{TLSClientConfig: config}
		defer transport.CloseIdleConnections()
		client = &http.Client{Transport: transport}
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill SIGKILLs member id (1-based) and waits for its exit. Members mode
// only.
func (c *Cluster) Kill(id int) error {
	if c.up != nil || id < 1 || id > len(c.members) {
		return fmt.Errorf("no member %d to kill (only StartMembers clusters kill single members)", id)
	}
	p := c.members[id-1]
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(Patience):
		return fmt.Errorf("member %d did not exit after SIGKILL", id)
	}
}

// Stop stops every process of the cluster: SIGTERM, and SIGKILL for any
// still running after a grace period. Safe to call more than once.
func (c *Cluster) Stop() {
	const grace = 20 * time.Second
	if c.up != nil {
		if c.up.running() {
			_ = c.up.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.up.exited:
			case <-time.After(grace):
				_ = c.up.cmd.Process.Kill()
				<-c.up.exited
			}
		}
		// `up` stops its members on SIGTERM, but not if it died first (a
		// SIGTERM before its handler is installed kills it at once):
		// end any member it left, found by its process group and config.
		for _, pid := range c.leftovers() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, m := range c.members {
		if m.running() {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, m := range c.members {
		select {
		case <-m.exited:
		case <-time.After(grace):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
	}
}

// leftovers are the pids of running members started by this cluster's
// `up`: in its process group and serving this cluster's config.
func (c *Cluster) leftovers() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(c.up.cmd.Process.Pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(c.Dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Logs returns the tail of every log of the cluster, for failure
// messages.
func (c *Cluster) Logs() string {
	var out bytes.Buffer
	files, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&out, "--- %s\n%s\n", f, data)
	}
	return out.String()
}

// clientTLS trusts TLSDir's CA and presents its client certificate.
func (c *Cluster) clientTLS() (*tls.Config, error) {
	pem, err := os.ReadFile(filepath.Join(c.TLSDir, "ca.pem"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, errors.New("no certificate in ca.pem yet")
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(c.TLSDir, "client.pem"), filepath.Join(c.TLSDir, "client-key.pem"))
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}, nil
}
