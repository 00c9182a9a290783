package raftlock

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNodes(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, nil)
	dir := "/" + uniqueName(t)
	cfg := dir + "/cfg"

	n, created, err := c.PutNode(ctx, cfg, []byte("v1"))
	if err != nil || !created || n.Version != 1 || n.Path != cfg || n.EphemeralOwner != "" {
		t.Fatalf("create: %+v created=%v err=%v", n, created, err)
	}
	got, err := c.GetNode(ctx, cfg)
	if err != nil || !bytes.Equal(got.Data, []byte("v1")) || got.CreateRevision != n.CreateRevision {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if got, err := c.GetNode(ctx, cfg, Stale()); err != nil || got.Version < 1 {
		t.Fatalf("stale get: %+v, %v", got, err)
	}
	n2, created, err := c.PutNode(ctx, cfg, []byte("v2"), IfVersion(1))
	if err != nil || created || n2.Version != 2 || n2.ModRevision <= n.ModRevision {
		t.Fatalf("conditional update: %+v created=%v err=%v", n2, created, err)
	}
	if _, _, err := c.PutNode(ctx, cfg, []byte("v3"), IfVersion(1)); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("stale conditional update: %v, want ErrVersionMismatch", err)
	}
	if _, _, err := c.PutNode(ctx, cfg, []byte("v3"), IfVersion(0)); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("must-not-exist on an existing node: %v, want ErrVersionMismatch", err)
	}

	first, _, err := c.PutNode(ctx, dir+"/job-", []byte("a"), Sequential())
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := c.PutNode(ctx, dir+"/job-", []byte("b"), Sequential())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Path, dir+"/job-") || !(first.Path < second.Path) {
		t.Fatalf("sequential paths %q then %q", first.Path, second.Path)
	}
	children, err := c.Children(ctx, dir)
	if err != nil || len(children) != 3 {
		t.Fatalf("children: %v, %v", children, err)
	}
	if err := c.DeleteNode(ctx, dir); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete of a parent: %v, want ErrNotEmpty", err)
	}

	s := openSession(t, c, 10*time.Second)
	eph, _, err := c.PutNode(ctx, dir+"/owned", nil, WithSession(s.ID()))
	if err != nil || eph.EphemeralOwner != s.ID() {
		t.Fatalf("ephemeral create: %+v, %v", eph, err)
	}
	if _, _, err := c.PutNode(ctx, dir+"/owned/child", nil); !errors.Is(err, ErrEphemeralParent) {
		t.Fatalf("child of an ephemeral node: %v, want ErrEphemeralParent", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNode(ctx, dir+"/owned"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ephemeral node after its session closed: %v, want ErrNotFound", err)
	}

	if err := c.DeleteNode(ctx, cfg, IfVersion(1)); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("delete at a stale version: %v", err)
	}
	if err := c.DeleteNode(ctx, cfg, IfVersion(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNode(ctx, cfg); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted node: %v, want ErrNotFound", err)
	}
	for _, p := range []string{first.Path, second.Path, dir} {
		if err := c.DeleteNode(ctx, p); err != nil {
			t.Fatalf("delete %s: %v", p, err)
		}
	}
	if _, _, err := c.PutNode(ctx, "/locks/x", nil); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("write under /locks: %v, want ErrBadRequest", err)
	}
	if _, err := c.Children(ctx, "/"); err != nil {
		t.Fatalf("children of the root: %v", err)
	}
}
