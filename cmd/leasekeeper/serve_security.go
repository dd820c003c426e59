package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// securityFlags are serve's flags for authentication and TLS
// (docs/security.md).
type securityFlags struct {
	authFile, tlsCert, tlsKey string
	insecure                  bool
}

// addSecurityFlags registers --auth-file, --insecure, --tls-cert and
// --tls-key on serve.
func addSecurityFlags(cmd *cobra.Command) *securityFlags {
	f := &securityFlags{}
	cmd.Flags().StringVar(&f.authFile, "auth-file", "", "JSON file of the principals, their token hashes and roles; without it every request is allowed and only loopback is served")
	cmd.Flags().BoolVar(&f.insecure, "insecure", false, "allow listening on a non-loopback address without --auth-file (anyone who reaches it may do anything)")
	cmd.Flags().StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS with; needs --tls-key")
	cmd.Flags().StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	return f
}

// flush logs what the Authorizer still holds back (the count of refusals
// left out of the log), at shutdown.
func (s *security) flush() {
	if f, ok := s.Authorizer.(interface{ Flush() }); ok {
		f.Flush()
	}
}

// security is what serve gets from its security flags: the Authorizer for
// server.Options (nil without an auth file) and how to listen.
type security struct {
	Authorizer server.Authorizer
	tls        *tls.Config
	auth       bool
	insecure   bool
	log        *slog.Logger
}

// setup checks the security flags against the address serve will listen on,
// before anything is opened: it loads the auth file and the TLS key pair, and
// refuses a non-loopback address without an auth file unless --insecure
// (which it warns about). Every refusal is a usageError naming the problem.
func (f *securityFlags) setup(listen string, log *slog.Logger) (*security, error) {
	s := &security{insecure: f.insecure, log: log}
	if f.authFile != "" {
		ps, err := auth.LoadFile(f.authFile)
		if err != nil {
			return nil, usageError{err}
		}
		s.auth = true
		s.Authorizer = auth.New(ps, log)
		log.Info("authentication on", "principals", len(ps))
	}
	switch {
	case f.tlsCert != "" && f.tlsKey != "":
		pair, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, usageError{fmt.Errorf("--tls-cert/--tls-key: %w", err)}
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	case f.tlsCert != "" || f.tlsKey != "":
		return nil, usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	loopback, err := checkListen(listen, s.auth, f.insecure)
	if err != nil {
		return nil, err
	}
	s.warn(loopback)
	return s, nil
}

// warn logs what is unsafe about serving on an address: no authentication
// beyond loopback (--insecure), or bearer tokens in clear text beyond
// loopback.
func (s *security) warn(loopback bool) {
	switch {
	case loopback:
	case !s.auth:
		s.log.Warn("--insecure: serving a non-loopback address without authentication: anyone who can reach it may acquire, release, revoke and write")
	case s.tls == nil:
		s.log.Warn("serving a non-loopback address without TLS: bearer tokens cross the network in clear text; use --tls-cert and --tls-key")
	}
}

// checkListen is the rule for serve's --listen: without an auth file, only a
// loopback address, unless insecure. It reports whether addr is loopback (a
// loopback IP or "localhost"); an empty host (":7070") is every interface,
// and a host name other than localhost is not trusted to be loopback.
func checkListen(addr string, haveAuth, insecure bool) (loopback bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usageError{fmt.Errorf("--listen %q: %w", addr, err)}
	}
	loopback = isLoopbackHost(host)
	if !loopback && !haveAuth && !insecure {
		return false, usageError{fmt.Errorf("refusing to listen on %s without --auth-file: only loopback addresses are served without authentication (pass --insecure to serve it anyway, to anyone who can reach it)", addr)}
	}
	return loopback, nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listen listens on addr and, with a certificate, serves TLS on it. Without
// an auth file or --insecure it checks the address actually bound as well,
// so that a name that resolved beyond loopback is not served. limit wraps
// the TCP listener, under TLS (net/http wants the *tls.Conn).
func (s *security) listen(addr string, limit func(net.Listener) net.Listener) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError{err}
	}
	if !s.auth && !s.insecure {
		if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
			ln.Close()
			return nil, usageError{fmt.Errorf("refusing to serve %s (bound %s) without --auth-file: not a loopback address (pass --insecure to serve it anyway)", addr, ln.Addr())}
		}
	}
	ln = limit(ln)
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	return ln, nil
}

// scheme is the URL scheme clients use: https with a certificate.
func (s *security) scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}
