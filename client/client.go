package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client talks to one leasekeeper server. It is safe for concurrent use.
type Client struct {
	base  string
	hc    *http.Client
	token string      // the bearer token, "" for none
	tls   *tls.Config // from WithTLSConfig, applied by New
}

// Option configures New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc instead of
// http.DefaultClient. An acquire with a wait holds its request open for up
// to the wait, so hc's Timeout, if any, should be longer than the waits used.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// New returns a Client for the server at baseURL, e.g. "http://127.0.0.1:7070"
// or "https://locks.example:7070" (the API's paths, /v1/..., are appended to
// it).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: http.DefaultClient}
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

// BaseURL is the server's URL as given to New, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// maxResponse bounds what a Client reads of an answer; a locks listing of a
// busy server is the largest legitimate one.
const maxResponse = 64 << 20

// Call is one request of the HTTP API. The functions AcquireCall, RenewCall,
// ... build the API's calls; other paths (GET /v1/health) can be called by
// filling the fields.
type Call struct {
	Method string     // http.MethodGet or http.MethodPost
	Path   string     // e.g. "/v1/acquire"
	Query  url.Values // GET parameters
	Body   any        // POST body, encoded as JSON
}

// Result is the server's answer to a Call, as it was sent.
type Result struct {
	Status int             // the HTTP status
	JSON   json.RawMessage // the body: the contract's result, e.g. ["granted",7,1767225630] or "error: not holder"
	path   string
}

// Do sends call and returns the server's answer, whatever it says: an error
// result is a Result too (see Result.Err). Do fails only when no answer was
// obtained: the server was unreachable, ctx ended, or the body was not JSON.
func (c *Client) Do(ctx context.Context, call Call) (*Result, error) {
	u := c.base + call.Path
	if len(call.Query) > 0 {
		u += "?" + call.Query.Encode()
	}
	var body io.Reader
	if call.Body != nil {
		b, err := json.Marshal(call.Body)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, call.Method, u, body)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", call.Method, call.Path, err)
	}
	if len(b) > maxResponse {
		return nil, fmt.Errorf("%s %s: answer longer than %d bytes", call.Method, call.Path, maxResponse)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s %s: HTTP %d with a body that is not JSON: %.200q", call.Method, call.Path, resp.StatusCode, b)
	}
	return &Result{Status: resp.StatusCode, JSON: b, path: call.Path}, nil
}

// Err interprets the answer: nil when it is the operation's success, an
// *Error for an error result ("error: not holder", ...). For an acquire, only
// a grant is a success: a queued answer is a *QueuedError, a deadlock a
// *DeadlockError, and a withdrawal during the wait ErrWithdrawn.
func (r *Result) Err() error {
	if r.Status != http.StatusOK {
		return resultError(r)
	}
	if r.path == pathAcquire {
		_, err := decodeAcquire(r)
		return err
	}
	return nil
}

// call sends call and turns an error result into an *Error.
func (c *Client) call(ctx context.Context, call Call) (*Result, error) {
	res, err := c.Do(ctx, call)
	if err != nil {
		return nil, err
	}
	if res.Status != http.StatusOK {
		return nil, resultError(res)
	}
	return res, nil
}

// resultError makes the *Error of a non-200 answer. The API's error bodies
// are "error: <code>" optionally followed by ": <detail>"; codes never hold
// ": ", so the first one splits them.
func resultError(r *Result) error {
	e := &Error{Status: r.Status}
	var s string
	if json.Unmarshal(r.JSON, &s) == nil && strings.HasPrefix(s, "error: ") {
		s = strings.TrimPrefix(s, "error: ")
		e.Code, e.Detail, _ = strings.Cut(s, ": ")
		return e
	}
	e.Detail = fmt.Sprintf("unexpected answer %.200s", r.JSON)
	return e
}

// decode unmarshals a success result into v, or says what was wrong.
func decode(r *Result, v any) error {
	if err := json.Unmarshal(r.JSON, v); err != nil {
		return fmt.Errorf("%s: unexpected answer %.200s: %w", r.path, r.JSON, err)
	}
	return nil
}
