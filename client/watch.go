package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

const pathEvents = "/v1/events"

// ErrReconnecting marks the errors Watch yields while it goes on: the
// stream was cut, or could not be opened for now, and Watch tries again.
var ErrReconnecting = errors.New("reconnecting to the event stream")

// watchIdle is how long Watch waits for anything from the server before it
// takes the connection for dead: the server sends a comment every 15
// seconds on a quiet stream.
const watchIdle = 45 * time.Second

// Watch yields the events of GET /v1/events that filter selects, from now
// on, in commit order, until ctx ends or the loop stops (docs/api.md,
// "Events"). Events are sent after the commit that made them.
//
// When the stream is cut (the network, the server stopping, nothing heard
// for 45 s) Watch opens it again by itself, resuming after the last event
// id it saw (Last-Event-ID), with a backoff from 100 ms to 5 s; the server
// then sends the events missed meanwhile from its buffer. It yields an
// error wrapping ErrReconnecting each time, and goes on unless the loop
// stops. Two kinds are about the stream, not the locks:
//
//   - lk.EventReset: events may have been missed (the reader came back
//     after more events than the server's buffer holds, the server
//     restarted, or lost touch with its PostgreSQL peers): read the state
//     again (Locks, Inspect, Status), then go on with the events that
//     follow, which may already be part of what was read.
//   - lk.EventOverflow: this reader fell further behind than the server's
//     buffer, and the server ended the stream. Watch yields it and
//     reconnects; a reset follows unless the buffer still had the events.
//
// An answer that a retry cannot change (400 for a bad filter, 401, 403,
// 404) is yielded as an *Error, and Watch stops. The Client's http.Client
// must have no Timeout, which would cut every stream.
func (c *Client) Watch(ctx context.Context, filter lk.EventFilter) iter.Seq2[lk.Event, error] {
	return c.WatchFrom(ctx, filter, -1)
}

// WatchFrom is Watch from the event after the one with id last, as a
// reader that saved the last id it handled resumes: the server sends the
// events after it from its buffer, or, when it no longer has them, a reset
// first. A negative last is Watch's "from now on".
func (c *Client) WatchFrom(ctx context.Context, filter lk.EventFilter, last int64) iter.Seq2[lk.Event, error] {
	return func(yield func(lk.Event, error) bool) {
		q := url.Values{}
		for k, v := range map[string]string{"lock": filter.Lock, "prefix": filter.Prefix, "client": filter.Client} {
			if v != "" {
				q.Set(k, v)
			}
		}
		u := c.base + pathEvents
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		lastID := ""
		if last >= 0 {
			lastID = strconv.FormatInt(last, 10)
		}
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			got := false
			err := c.watchOnce(ctx, u, &lastID, func(e lk.Event) bool {
				got, backoff = true, 100*time.Millisecond
				return yield(e, nil)
			})
			if errors.Is(err, errStop) || ctx.Err() != nil {
				return
			}
			var e *Error
			if errors.As(err, &e) && permanent(e) {
				yield(lk.Event{}, err)
				return
			}
			if err == nil {
				err = errors.New("the server ended the stream")
			}
			if !yield(lk.Event{}, fmt.Errorf("%w: %w", ErrReconnecting, err)) {
				return
			}
			wait := backoff
			if errors.As(err, &e) && e.RetryAfter > wait {
				wait = e.RetryAfter
			}
			if !got {
				backoff = min(2*backoff, 5*time.Second)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// errStop: the loop over Watch's events stopped.
var errStop = errors.New("stopped")

// permanent reports whether an error answer to GET /v1/events would be the
// same on a retry.
func permanent(e *Error) bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed:
		return true
	}
	return false
}

// watchOnce reads one connection's stream, passing each event to fn and
// keeping *last, the id to resume after, current.
func (c *Client) watchOnce(ctx context.Context, u string, last *string, fn func(lk.Event) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return errorOf(resp, b)
	}
	// A connection that went silent (a host gone, a partition) looks like
	// a quiet one: the server's keep-alive comments tell them apart.
	idle := time.AfterFunc(watchIdle, cancel)
	defer idle.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var id, kind, data string
	hasID := false
	for sc.Scan() {
		idle.Reset(watchIdle)
		line := sc.Text()
		if line == "" { // the end of an event
			if hasID {
				*last = id
			}
			if data != "" {
				var e lk.Event
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					return fmt.Errorf("GET %s: an event that is not one: %.200q: %w", pathEvents, data, err)
				}
				if e.Kind == "" {
					e.Kind = lk.EventKind(kind)
				}
				if !fn(e) {
					return errStop
				}
			}
			id, kind, data, hasID = "", "", "", false
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // a comment
		case "id":
			if _, err := strconv.ParseInt(value, 10, 64); err == nil {
				id, hasID = value, true
			}
		case "event":
			kind = value
		case "data":
			if data != "" {
				data += "\n"
			}
			data += value
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return nil
}
