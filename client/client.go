package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// Client talks to one leasekeeper server. It is safe for concurrent use.
type Client struct {
	base  string
	hc    *http.Client
	token string      // the bearer token, "" for none
	tls   *tls.Config // from WithTLSConfig, applied by New
	// rateLimitWait bounds the time spent retrying answers 429
	// (WithRateLimitWait).
	rateLimitWait time.Duration
}

// Option configures New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc instead of
// http.DefaultClient. An acquire with a wait holds its request open for up
// to the wait, so hc's Timeout, if any, should be longer than the waits used.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// DefaultRateLimitWait is how long in all a Client retries a request answered
// 429 rate_limited, unless WithRateLimitWait says otherwise.
const DefaultRateLimitWait = time.Minute

// WithRateLimitWait sets how long in all a request answered 429 (a principal
// over its rate or its blocked acquires, docs/api.md) is retried, each time
// after the answer's Retry-After (a second when it has none), and always
// within the request's ctx: a retry that could not start before ctx's
// deadline is not made. The last 429 is then returned, an *Error matching
// lk.ErrRateLimited. Retrying is safe whatever the request: a 429 says the
// server did nothing. 0 returns the first 429 at once. Acquire retries for
// up to its Wait if that is longer, and shortens the wait it asks for by the
// time spent.
func WithRateLimitWait(d time.Duration) Option {
	return func(c *Client) { c.rateLimitWait = max(d, 0) }
}

// New returns a Client for the server at baseURL, e.g. "http://127.0.0.1:7070"
// or "https://locks.example:7070". The API's paths, /v1/..., are appended to
// it, so a baseURL that ends in /v1 (a common slip) is taken as the root it
// is under: "http://127.0.0.1:7070/v1" reaches the same server.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: rootURL(baseURL), hc: http.DefaultClient, rateLimitWait: DefaultRateLimitWait}
	for _, o := range opts {
		o(c)
	}
	if c.tls != nil {
		c.hc = withTLS(c.hc, c.tls)
	}
	return c
}

// withTLS returns a copy of hc whose transport, a clone of hc's (or of
// http.DefaultTransport), uses cfg. A transport that is not an
// *http.Transport is left as it is.
func withTLS(hc *http.Client, cfg *tls.Config) *http.Client {
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return hc
	}
	t = t.Clone()
	t.TLSClientConfig = cfg.Clone()
	out := *hc
	out.Transport = t
	return &out
}

// rootURL is the server's root URL of a base URL: without a trailing slash,
// nor a last path element v1, which the API's paths bring themselves.
func rootURL(base string) string {
	base = strings.TrimRight(base, "/")
	if root, ok := strings.CutSuffix(base, "/v1"); ok && strings.Contains(root, "://") {
		return strings.TrimRight(root, "/")
	}
	return base
}

// BaseURL is the server's URL as given to New, without a trailing slash or
// /v1.
func (c *Client) BaseURL() string { return c.base }

// maxResponse bounds what a Client reads of an answer; a locks listing of a
// busy server is the largest legitimate one.
const maxResponse = 64 << 20

// noRateLimitRetry marks a ctx whose requests do must not retry after a
// 429: Acquire retries itself, shortening the wait it asks for.
type noRateLimitRetry struct{}

// do sends one request of the API and decodes a 200 answer into out. An
// error answer is an *Error; any other error means no answer was obtained:
// the server was unreachable, ctx ended, or what answered did not speak the
// API. An answer 429 is retried after its Retry-After for up to the
// Client's rateLimitWait (WithRateLimitWait).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var b []byte
	if in != nil {
		var err error
		if b, err = json.Marshal(in); err != nil {
			return err
		}
	}
	until := time.Now().Add(c.rateLimitWait)
	if ctx.Value(noRateLimitRetry{}) != nil {
		until = time.Time{}
	}
	for {
		err := c.send(ctx, method, path, u, b, out)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || !waitRetry(ctx, e, until) {
			return err
		}
	}
}

// waitRetry waits out the Retry-After of e, a 429, and reports whether to
// retry: not when the retry would come after until or after ctx's deadline,
// nor when ctx ends meanwhile. A 429 is the server's word that it did
// nothing, so the caller learns more from it than from ctx's error.
func waitRetry(ctx context.Context, e *Error, until time.Time) bool {
	d := e.RetryAfter
	if d <= 0 {
		d = time.Second
	}
	at := time.Now().Add(d)
	if at.After(until) {
		return false
	}
	if dl, ok := ctx.Deadline(); ok && at.After(dl) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// send sends the request once; in is the JSON of the request's body, nil
// for none.
func (c *Client) send(ctx context.Context, method, path, u string, in []byte, out any) error {
	var body io.Reader
	if in != nil {
		body = bytes.NewReader(in)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if len(b) > maxResponse {
		return fmt.Errorf("%s %s: answer longer than %d bytes", method, path, maxResponse)
	}
	if resp.StatusCode != http.StatusOK {
		return errorOf(resp, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: unexpected answer %.200q: %w", method, path, bytes.TrimSpace(b), err)
	}
	return nil
}

// errorOf makes the *Error of a non-200 answer: the API's error object, or,
// from something that does not speak the API (a proxy, a wrong URL), the
// status and the start of the body.
func errorOf(resp *http.Response, b []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	var w lk.Error
	if json.Unmarshal(b, &w) == nil && w.Code != "" {
		e.Code, e.Message = w.Code, w.Message
		if w.Applied != nil && !*w.Applied && resp.StatusCode >= 500 {
			e.NotApplied = true
		}
	} else {
		e.Message = fmt.Sprintf("unexpected answer %.200q", bytes.TrimSpace(b))
	}
	e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
	return e
}

// retryAfter is a Retry-After header's delay: delay-seconds, or an HTTP date
// (RFC 9110 section 10.2.3); 0 when it has none or it is past.
func retryAfter(h string) time.Duration {
	if secs, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		// Capped so that a huge value cannot overflow a Duration; any
		// delay that long is past every retry budget anyway.
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
