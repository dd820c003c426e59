package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// rawClient is one benchmark client speaking the least HTTP/1.1 it can: one
// keep-alive connection, requests prepared once, answers read by
// Content-Length. lkload shares the machine's cores with the server it
// measures, and Go's full HTTP client costs about as much CPU per request as
// the server does; the way wrk and h2load do it, this one stays out of the
// way. --http net measures with net/http instead.
type rawClient struct {
	addr    string
	timeout time.Duration
	conn    net.Conn
	r       *bufio.Reader
	acquire []byte // the whole request, prepared once
	renew   []byte
	renews  int // renews between the acquire and the release of a pair
	release []byte
	buf     []byte
}

func newRawClient(base, lock, client string, ttl, renews int, timeout time.Duration) (*rawClient, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("--http raw needs an http:// server URL, not %q", base)
	}
	request := func(path, body string) []byte {
		return []byte(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, u.Host, len(body), body))
	}
	return &rawClient{
		addr:    u.Host,
		timeout: timeout,
		acquire: request("/v1/acquire", fmt.Sprintf(`{"client":%q,"lock":%q,"ttl":%d}`, client, lock, ttl)),
		renew:   request("/v1/renew", fmt.Sprintf(`{"client":%q,"lock":%q,"ttl":%d}`, client, lock, ttl)),
		renews:  renews,
		release: request("/v1/release", fmt.Sprintf(`{"client":%q,"lock":%q}`, client, lock)),
	}, nil
}

// pair runs one acquire, its renews and its release. The answers may come
// in either shape (answers.go): the old tuples or the objects.
func (c *rawClient) pair() error {
	status, body, err := c.do(c.acquire)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if !isGranted(status, body, true) {
		return fmt.Errorf("acquire: %d %s", status, bytes.TrimSpace(body))
	}
	for range c.renews {
		if status, body, err = c.do(c.renew); err != nil {
			return fmt.Errorf("renew: %w", err)
		}
		if !isRenewed(status, body) {
			return fmt.Errorf("renew: %d %s", status, bytes.TrimSpace(body))
		}
	}
	if status, body, err = c.do(c.release); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if !isReleased(status, body) {
		return fmt.Errorf("release: %d %s", status, bytes.TrimSpace(body))
	}
	return nil
}

// do sends a prepared request and reads the answer; a broken connection is
// dropped, to be opened again by the next request.
func (c *rawClient) do(req []byte) (int, []byte, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, nil, err
		}
		c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	}
	c.conn.SetDeadline(time.Now().Add(c.timeout))
	status, body, err := c.exchange(req)
	if err != nil {
		c.close()
	}
	return status, body, err
}

func (c *rawClient) exchange(req []byte) (int, []byte, error) {
	if _, err := c.conn.Write(req); err != nil {
		return 0, nil, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, fmt.Errorf("not an HTTP answer: %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	length, closeAfter := -1, false
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, nil, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, errors.New("chunked answers are not expected")
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			closeAfter = true
		}
	}
	if length < 0 {
		return 0, nil, errors.New("answer without Content-Length")
	}
	if cap(c.buf) < length {
		c.buf = make([]byte, length)
	}
	body := c.buf[:length]
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, nil, err
	}
	if closeAfter {
		c.close()
	}
	return status, body, nil
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}
