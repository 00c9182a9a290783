package raftlock

import (
	"context"
	"encoding/json"
)

// ObserveEvent is one state of an observed election.
type ObserveEvent struct {
	// Leader is the leader, nil when the election has none.
	Leader *Leader
	// Err, when set, is the last event: observing failed for good (bad
	// name, or every reconnect failed) and the channel closes after it.
	Err error
}

// Observe streams election's current leader, then every change of leader
// or value (GET /v1/elections/{name}/observe, Server-Sent Events). A
// dropped or silent stream is reconnected, with failover; each connect
// starts with the current state, so states are deduplicated and nothing
// that matters is missed (changes applied in one burst may arrive as one
// event with the latest state). The channel closes when ctx ends, or
// after an event with Err. Receive promptly: the stream waits for you.
func (c *Client) Observe(ctx context.Context, election string) <-chan ObserveEvent {
	ch := make(chan ObserveEvent)
	go c.observe(ctx, election, ch)
	return ch
}

func (c *Client) observe(ctx context.Context, election string, ch chan<- ObserveEvent) {
	defer close(ch)
	send := func(ev ObserveEvent) bool { return sendEvent(ctx, ch, ev) }
	if err := checkName(election); err != nil {
		send(ObserveEvent{Err: err})
		return
	}
	path := "/v1/elections/" + election + "/observe"
	var last *Leader
	first := true
	deliver := func(l *Leader) bool {
		if !first && sameLeader(last, l) {
			return true
		}
		first, last = false, l
		return send(ObserveEvent{Leader: l})
	}
	c.followStream(ctx, func(endpoint string) (bool, bool, error) {
		return c.observeOnce(ctx, endpoint, path, deliver)
	}, func(err error) { send(ObserveEvent{Err: err}) })
}

func sameLeader(a, b *Leader) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// observeOnce reads one SSE connection until it ends. delivered says
// whether any event arrived; fatal whether reconnecting is pointless.
func (c *Client) observeOnce(ctx context.Context, endpoint, path string, deliver func(*Leader) bool) (delivered, fatal bool, err error) {
	fatal, err = c.readStream(ctx, endpoint, path, "observe", func(ev sseEvent) *streamEnd {
		if ev.name != "leader" {
			return nil
		}
		var body electionBody
		if err := json.Unmarshal([]byte(ev.data), &body); err != nil {
			return &streamEnd{fatal: true, err: &Error{Code: CodeProtocol, Message: "observe event: " + err.Error(), Err: err}}
		}
		delivered = true
		if !deliver(body.Leader) {
			return &streamEnd{err: ctx.Err()}
		}
		return nil
	})
	return delivered, fatal, err
}
