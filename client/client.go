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

// do sends one request of the API and decodes a 200 answer into out. An
// error answer is an *Error; any other error means no answer was obtained:
// the server was unreachable, ctx ended, or what answered did not speak the
// API.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
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
	} else {
		e.Message = fmt.Sprintf("unexpected answer %.200q", bytes.TrimSpace(b))
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}
