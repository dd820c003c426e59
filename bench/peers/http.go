package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// httpConn is one client's keep-alive HTTP/1.1 connection to a leasekeeper
// server, speaking only what a POST of a small JSON body and its answer
// need. The clients share the machine's cores with the servers they
// measure, and Go's net/http client costs about as much CPU per request as
// the server does (docs/performance.md): a wrk-like client keeps the
// figures the server's. A broken connection is dropped and the next request
// dials again.
type httpConn struct {
	addr    string
	timeout time.Duration // for one request and its answer
	nc      net.Conn
	r       *bufio.Reader
	req     []byte // the request being sent, reused
	body    []byte // the last answer's body, reused
}

func newHTTPConn(addr string, timeout time.Duration) *httpConn {
	return &httpConn{addr: addr, timeout: timeout}
}

// post sends body to path and returns the answer's status and body, which
// stays valid until the next post.
func (c *httpConn) post(path string, body []byte) (int, []byte, error) {
	if c.nc == nil {
		nc, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, nil, err
		}
		c.nc, c.r = nc, bufio.NewReaderSize(nc, 4096)
	}
	r := append(c.req[:0], "POST "...)
	r = append(r, path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, c.addr...)
	r = append(r, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	r = append(r, "\r\n\r\n"...)
	r = append(r, body...)
	c.req = r
	c.nc.SetDeadline(time.Now().Add(c.timeout))
	status, answer, err := c.roundTrip()
	if err != nil {
		c.close()
		return 0, nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return status, answer, nil
}

func (c *httpConn) roundTrip() (int, []byte, error) {
	if _, err := c.nc.Write(c.req); err != nil {
		return 0, nil, err
	}
	status, length, keep, err := readHead(c.r)
	if err != nil {
		return 0, nil, err
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.r, c.body); err != nil {
		return 0, nil, err
	}
	if !keep {
		c.close()
	}
	return status, c.body, nil
}

// readHead reads an answer's status line and headers: its status, the
// length of its body, and whether the connection stays open after it.
// Every leasekeeper answer but the event stream, which this client never
// asks for, has a Content-Length.
func readHead(r *bufio.Reader) (status, length int, keep bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, 0, false, fmt.Errorf("not an HTTP/1.1 status line: %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, 0, false, fmt.Errorf("bad status line %q", line)
	}
	length, keep = -1, true
	for {
		line, err = r.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, 0, false, errors.New("a chunked answer: only answers with a Content-Length are expected")
		}
	}
	if length < 0 {
		return 0, 0, false, errors.New("an answer without Content-Length")
	}
	return status, length, keep, nil
}

func (c *httpConn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc, c.r = nil, nil
	}
}
