package raftlock

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
)

// Node watches (docs/api.md, Nodes): GET /v1/nodes/{path}?watch=true&
// since_revision=R as Server-Sent Events, one per change of the node or
// of its direct children after R.

// WatchEvent is one item of Watch: a change (Type "put" or "delete"), or
// the end of the watch (Type "compacted", or Err).
type WatchEvent struct {
	// Type is "put", "delete" or "compacted".
	Type string
	// Revision is the change's revision (0 for "compacted").
	Revision uint64
	// Path is the changed node's path.
	Path string
	// Node is the node after a "put"; nil for a "delete".
	Node *Node
	// Floor, for "compacted": the member no longer keeps the changes
	// after the requested revision; read afresh (ReadNode) and watch
	// from the read's revision. The channel closes after it.
	Floor uint64
	// Err, when set, is the last event: the watch failed for good (bad
	// path, or every reconnect failed) and the channel closes after it.
	Err error
}

// ReadNode reads the node at path like GetNode, and returns the revision
// the read saw: pass it to Watch to miss no later change.
func (c *Client) ReadNode(ctx context.Context, path string) (*Node, uint64, error) {
	if err := checkPath(path); err != nil {
		return nil, 0, err
	}
	var revision uint64
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: apiNodePath(path), revision: &revision})
	if err != nil {
		return nil, 0, err
	}
	var b nodeBody
	if err := decode(out, &b); err != nil {
		return nil, 0, err
	}
	n, err := b.node()
	if err != nil {
		return nil, 0, err
	}
	if n.Path == "" {
		n.Path = path
	}
	return n, revision, nil
}

// Watch streams the changes of the node at path and of its direct
// children after sinceRevision (0: from the revision when the watch
// starts, read linearizably first), in revision order, including changes
// made between the read that gave sinceRevision and the watch's start.
// A dropped or silent stream is reconnected (to any member) from the
// last revision delivered, so nothing is missed or repeated. The channel
// closes when ctx ends, after a "compacted" event, or after an event
// with Err. Receive promptly: the stream waits for you.
func (c *Client) Watch(ctx context.Context, path string, sinceRevision uint64) <-chan WatchEvent {
	ch := make(chan WatchEvent)
	go c.watch(ctx, path, sinceRevision, ch)
	return ch
}

// watching is a watch's position: the newest revision delivered and the
// paths delivered at it (a reconnect resumes after the revision before,
// since the rest of that revision's changes may not have arrived, and
// skips these).
type watching struct {
	revision    uint64
	atRevision  map[string]bool
	deliverable func(WatchEvent) bool
}

// deliver passes on a change not yet delivered; false when ctx ended.
func (w *watching) deliver(ev WatchEvent) bool {
	if ev.Revision < w.revision || (ev.Revision == w.revision && w.atRevision[ev.Path]) {
		return true
	}
	if ev.Revision > w.revision {
		w.revision = ev.Revision
		w.atRevision = map[string]bool{}
	}
	w.atRevision[ev.Path] = true
	return w.deliverable(ev)
}

// since is the revision to resume after.
func (w *watching) since() uint64 {
	if len(w.atRevision) > 0 && w.revision > 0 {
		return w.revision - 1
	}
	return w.revision
}

func (c *Client) watch(ctx context.Context, path string, since uint64, ch chan<- WatchEvent) {
	defer close(ch)
	send := func(ev WatchEvent) bool { return sendEvent(ctx, ch, ev) }
	if err := checkPath(path); err != nil {
		send(WatchEvent{Err: err})
		return
	}
	if since == 0 {
		_, revision, err := c.ReadNode(ctx, "/")
		if err != nil {
			if ctx.Err() == nil {
				send(WatchEvent{Err: err})
			}
			return
		}
		since = revision
	}
	w := &watching{revision: since, atRevision: map[string]bool{}, deliverable: send}
	c.followStream(ctx, func(endpoint string) (bool, bool, error) {
		route := apiNodePath(path) + "?watch=true&since_revision=" + strconv.FormatUint(w.since(), 10)
		return c.watchOnce(ctx, endpoint, route, w)
	}, func(err error) { send(WatchEvent{Err: err}) })
}

type changeBody struct {
	Revision uint64    `json:"revision"`
	Path     string    `json:"path"`
	Node     *nodeBody `json:"node"`
}

// watchOnce reads one SSE connection until it ends. delivered says
// whether any change arrived; fatal whether the watch is over (err nil
// after "compacted", which was delivered).
func (c *Client) watchOnce(ctx context.Context, endpoint, route string, w *watching) (delivered, fatal bool, err error) {
	fatal, err = c.readStream(ctx, endpoint, route, "watch", func(ev sseEvent) *streamEnd {
		switch ev.name {
		case "put", "delete":
			var body changeBody
			if err := json.Unmarshal([]byte(ev.data), &body); err != nil {
				return &streamEnd{fatal: true, err: &Error{Code: CodeProtocol, Message: "watch event: " + err.Error(), Err: err}}
			}
			change := WatchEvent{Type: ev.name, Revision: body.Revision, Path: body.Path}
			if body.Node != nil {
				node, err := body.Node.node()
				if err != nil {
					return &streamEnd{fatal: true, err: err}
				}
				change.Node = node
				change.Node.Path = body.Path
			}
			delivered = true
			if !w.deliver(change) {
				return &streamEnd{err: ctx.Err()}
			}
		case "compacted":
			var body struct {
				Floor uint64 `json:"floor"`
			}
			if err := json.Unmarshal([]byte(ev.data), &body); err != nil {
				return &streamEnd{fatal: true, err: &Error{Code: CodeProtocol, Message: "watch event: " + err.Error(), Err: err}}
			}
			w.deliverable(WatchEvent{Type: "compacted", Floor: body.Floor})
			return &streamEnd{fatal: true}
		}
		return nil
	})
	return delivered, fatal, err
}
