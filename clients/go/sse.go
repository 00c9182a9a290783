package raftlock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
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
	send := func(ev ObserveEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
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
	index := int(atomic.LoadInt32(&c.preferred))
	drops := 0
	for {
		delivered, fatal, err := c.observeOnce(ctx, c.endpoints[index%len(c.endpoints)], path, deliver)
		if ctx.Err() != nil {
			return
		}
		if fatal {
			send(ObserveEvent{Err: err})
			return
		}
		if delivered {
			drops = 0
		}
		drops++
		if drops >= c.cfg.Attempts {
			send(ObserveEvent{Err: err})
			return
		}
		index++
		if sleepCtx(ctx, c.backoff(drops)) != nil {
			return
		}
	}
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
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Bounds the wait for the headers, then each silence.
	watchdog := time.AfterFunc(c.cfg.RequestTimeout, cancel)
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, endpoint+path, nil)
	if err != nil {
		return false, true, err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req)
	resp, err := c.http.Do(req)
	if why := tlsError(err); why != "" {
		return false, true, &Error{Code: CodeTLS, Message: endpoint + ": " + why, Err: err}
	}
	if err != nil {
		return false, false, &Error{Code: CodeUnavailable, Message: endpoint + ": " + err.Error(), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		e := errorOf(resp.StatusCode, body)
		switch e.Code {
		case CodeNoLeader, CodeShuttingDown, CodeOutcomeUnknown, CodeInternal, CodeNotCaughtUp:
			return false, false, e
		}
		return false, true, e
	}
	watchdog.Reset(c.cfg.ObserveIdleTimeout)
	reader := bufio.NewReader(resp.Body)
	var parser sseParser
	for {
		line, err := reader.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the server closed the stream")
			}
			return delivered, false, &Error{Code: CodeUnavailable, Message: endpoint + ": observe: " + err.Error(), Err: err}
		}
		watchdog.Reset(c.cfg.ObserveIdleTimeout)
		ev, ok := parser.line(line)
		if !ok || ev.name != "leader" {
			continue
		}
		var body electionBody
		if err := json.Unmarshal([]byte(ev.data), &body); err != nil {
			return delivered, true, &Error{Code: CodeProtocol, Message: "observe event: " + err.Error(), Err: err}
		}
		delivered = true
		if !deliver(body.Leader) {
			return delivered, false, ctx.Err()
		}
	}
}

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	name string
	data string
}

// sseParser is the subset of the WHATWG rules a raftlock server needs:
// event, data (several lines join with \n), comments, \n or \r\n.
type sseParser struct {
	name    string
	data    []string
	hasData bool
}

// line takes one line (with or without its end) and returns an event
// when the line completes one.
func (p *sseParser) line(raw string) (sseEvent, bool) {
	line := strings.TrimRight(raw, "\r\n")
	if line == "" {
		if !p.hasData {
			p.name = ""
			return sseEvent{}, false
		}
		ev := sseEvent{name: p.name, data: strings.Join(p.data, "\n")}
		if ev.name == "" {
			ev.name = "message"
		}
		*p = sseParser{}
		return ev, true
	}
	if strings.HasPrefix(line, ":") {
		return sseEvent{}, false
	}
	field, value := line, ""
	if i := strings.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], strings.TrimPrefix(line[i+1:], " ")
	}
	switch field {
	case "event":
		p.name = value
	case "data":
		p.data = append(p.data, value)
		p.hasData = true
	}
	return sseEvent{}, false
}
