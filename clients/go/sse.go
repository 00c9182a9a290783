package raftlock

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The plumbing of the client's Server-Sent Event streams, shared by
// Observe (observe.go) and Watch (watch.go): opening a stream, reading
// its events under an idle watchdog, and reconnecting with failover.
// Each caller keeps only what its events mean.

// sendEvent hands ev to ch; false when ctx ended first.
func sendEvent[T any](ctx context.Context, ch chan<- T, ev T) bool {
	select {
	case ch <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// followStream runs once, one connection at a time, from the preferred
// member on, moving to the next member after each drop, until ctx ends,
// once says reconnecting is pointless, or c.cfg.Attempts connections in a
// row delivered nothing. fail gets the error that ended it (not when ctx
// did, nor after a fatal end without error).
func (c *Client) followStream(ctx context.Context, once func(endpoint string) (delivered, fatal bool, err error), fail func(error)) {
	index := int(atomic.LoadInt32(&c.preferred))
	drops := 0
	for {
		delivered, fatal, err := once(c.endpoints[index%len(c.endpoints)])
		if ctx.Err() != nil {
			return
		}
		if fatal {
			if err != nil {
				fail(err)
			}
			return
		}
		if delivered {
			drops = 0
		}
		drops++
		if drops >= c.cfg.Attempts {
			fail(err)
			return
		}
		index++
		if sleepCtx(ctx, c.backoff(drops)) != nil {
			return
		}
	}
}

// streamEnd, returned by an event handler, ends the connection: fatal
// says whether reconnecting is pointless.
type streamEnd struct {
	fatal bool
	err   error
}

// readStream opens route on endpoint as an event stream and hands
// each event to handle until handle returns an end, or the stream breaks
// or stays silent for c.cfg.ObserveIdleTimeout. fatal says whether
// reconnecting is pointless. name ("observe", "watch") prefixes the
// error of a broken stream.
func (c *Client) readStream(ctx context.Context, endpoint, route, name string, handle func(sseEvent) *streamEnd) (fatal bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Bounds the wait for the headers, then each silence (the server
	// sends keepalive comments).
	watchdog := time.AfterFunc(c.cfg.RequestTimeout, cancel)
	defer watchdog.Stop()
	resp, fatal, err := c.openStream(sctx, endpoint, route)
	if err != nil {
		return fatal, err
	}
	defer resp.Body.Close()
	watchdog.Reset(c.cfg.ObserveIdleTimeout)
	reader := bufio.NewReader(resp.Body)
	var parser sseParser
	for {
		line, err := reader.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the server closed the stream")
			}
			return false, &Error{Code: CodeUnavailable, Message: endpoint + ": " + name + ": " + err.Error(), Err: err}
		}
		watchdog.Reset(c.cfg.ObserveIdleTimeout)
		if ev, ok := parser.line(line); ok {
			if end := handle(ev); end != nil {
				return end.fatal, end.err
			}
		}
	}
}

// openStream sends a GET for an event stream: the answer, or whether
// retrying elsewhere is pointless.
func (c *Client) openStream(ctx context.Context, endpoint, route string) (*http.Response, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+route, nil)
	if err != nil {
		return nil, true, err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req)
	resp, err := c.http.Do(req)
	if why := tlsError(err); why != "" {
		return nil, true, &Error{Code: CodeTLS, Message: endpoint + ": " + why, Err: err}
	}
	if err != nil {
		return nil, false, &Error{Code: CodeUnavailable, Message: endpoint + ": " + err.Error(), Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		e := errorOf(resp.StatusCode, body)
		// Another member may serve the stream: no leader or not caught up
		// here, this member cannot serve (a failed or full disk, replaced
		// data, no room), or it failed inside or is going down.
		if e.Code == CodeNoLeader || e.Code == CodeNotCaughtUp ||
			codeRetryElsewhere(e.Code) || codeOutcomeUnknown(e.Code) {
			return nil, false, e
		}
		return nil, true, e
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return nil, true, &Error{Code: CodeProtocol, Message: endpoint + ": not an event stream"}
	}
	return resp, false, nil
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
