package raftlock

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	"example.invalid/raftlock/clients/go/internal/testcluster"
)

// nextChange receives one watch event within patience.
func nextChange(t *testing.T, ch <-chan WatchEvent) (WatchEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(patience):
		t.Fatal("no watch event within patience")
		return WatchEvent{}, false
	}
}

// A watch from a read's revision sees what was written after the read
// even before the watch started, then puts and deletes of the children
// in revision order, and nothing outside the watched node.
func TestWatchFromAReadMissesNothing(t *testing.T) {
	ctx := testCtx(t)
	dir := "/" + uniqueName(t)
	c := rotated(t, 2)
	reader, writer := c[0], c[1]
	if _, _, err := writer.PutNode(ctx, dir+"/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	node, revision, err := reader.ReadNode(ctx, dir+"/a")
	if err != nil || string(node.Data) != "1" || revision < node.ModRevision {
		t.Fatalf("read: %+v at %d, %v", node, revision, err)
	}
	if _, _, err := writer.PutNode(ctx, dir+"/b", []byte("2")); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := reader.Watch(wctx, dir, revision)
	if _, _, err := writer.PutNode(ctx, dir+"/a", []byte("3")); err != nil {
		t.Fatal(err)
	}
	if err := writer.DeleteNode(ctx, dir+"/b"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := writer.PutNode(ctx, dir+"-sibling", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := writer.PutNode(ctx, dir+"/c", []byte("4")); err != nil {
		t.Fatal(err)
	}
	want := []string{"put " + dir + "/b 2", "put " + dir + "/a 3", "delete " + dir + "/b", "put " + dir + "/c 4"}
	last := revision
	for i, w := range want {
		ev, ok := nextChange(t, events)
		if !ok || ev.Err != nil {
			t.Fatalf("event %d: %+v (open %v)", i, ev, ok)
		}
		got := ev.Type + " " + ev.Path
		if ev.Node != nil {
			got += " " + string(ev.Node.Data)
		}
		if got != w || ev.Revision <= last {
			t.Fatalf("event %d: %q at %d, want %q after %d", i, got, ev.Revision, w, last)
		}
		last = ev.Revision
	}
	cancel()
	for range events {
		// drained: the channel closes once ctx ends
	}
}

// A watch from a revision the member no longer keeps (10,000 changes
// later) gets one "compacted" event, and the channel closes.
func TestWatchFromACompactedRevision(t *testing.T) {
	ctx := testCtx(t)
	dir := "/" + uniqueName(t)
	c := newClient(t, nil, nil)
	if _, _, err := c.PutNode(ctx, dir+"/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	_, revision, err := c.ReadNode(ctx, dir+"/a")
	if err != nil {
		t.Fatal(err)
	}
	// 80 transactions of 128 puts of children (the API's most per
	// transaction): more changes than a member keeps.
	data := base64.StdEncoding.EncodeToString([]byte("x"))
	for batch := 0; batch < 80; batch++ {
		ops := make([]map[string]interface{}, 0, 128)
		for i := 0; i < 128; i++ {
			ops = append(ops, map[string]interface{}{"put": map[string]interface{}{"path": fmt.Sprintf("%s/bulk-%d-%d", dir, batch, i), "data": data}})
		}
		body := map[string]interface{}{"compare": []interface{}{}, "success": ops, "failure": []interface{}{}}
		if _, _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/txn", body: body, noResend: true}); err != nil {
			t.Fatalf("bulk transaction %d: %v", batch, err)
		}
	}
	// Every member applies the writes soon; until the one watched has, it
	// still serves the revision: retry a fresh watch within patience.
	eventually(t, "a compaction notice", func() (bool, error) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events := c.Watch(wctx, dir, revision)
		ev, ok := nextChange(t, events)
		if !ok || ev.Type != "compacted" {
			return false, fmt.Errorf("got %+v", ev)
		}
		if ev.Floor <= revision {
			return false, fmt.Errorf("floor %d not above %d", ev.Floor, revision)
		}
		if _, open := nextChange(t, events); open {
			return false, fmt.Errorf("the channel stays open after compacted")
		}
		return true, nil
	})
}

// The member a watch streams from is killed: the watch reconnects to
// another member from the last change it delivered, and every change is
// delivered once, in order.
func TestWatchResumesOnAnotherMemberWhenItsMemberDies(t *testing.T) {
	cluster, err := testcluster.StartMembers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cluster.Logs())
		}
		cluster.Stop()
	})
	ctx := testCtx(t)
	e := cluster.Endpoints
	watcher := newClient(t, []string{e[0], e[1], e[2]}, nil)
	writer := newClient(t, []string{e[1], e[2], e[0]}, nil)
	dir := "/watched"
	if _, _, err := writer.PutNode(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	_, revision, err := watcher.ReadNode(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if watcher.preferred != 0 {
		t.Fatalf("the watcher uses member %d, want the first", watcher.preferred+1)
	}
	events := watcher.Watch(ctx, dir, revision)
	put := func(name string) {
		t.Helper()
		if _, _, err := writer.PutNode(ctx, dir+"/"+name, []byte(name)); err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
	}
	expect := func(name string) {
		t.Helper()
		ev, ok := nextChange(t, events)
		if !ok || ev.Err != nil || ev.Type != "put" || ev.Path != dir+"/"+name {
			t.Fatalf("want put %s, got %+v (open %v)", name, ev, ok)
		}
	}
	put("a")
	expect("a")
	if err := cluster.Kill(1); err != nil {
		t.Fatal(err)
	}
	put("b")
	put("c")
	expect("b")
	expect("c")
}
