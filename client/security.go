package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// WithBearerToken sends token as "Authorization: Bearer TOKEN" with every
// request, for a server started with --auth-file (docs/security.md). The
// token goes out as it is: over anything but loopback, use an https:// URL.
func WithBearerToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithTLSConfig makes the Client use cfg for https:// URLs: its RootCAs are
// the certificate authorities it trusts (nil: the system's roots). New
// applies it to a clone of the transport of the http.Client in use (the one
// of WithHTTPClient, else http.DefaultClient's), whatever the order of the
// options; a WithHTTPClient whose Transport is not an *http.Transport keeps
// its own TLS settings.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) { c.tls = cfg }
}

// LoadCAFile returns a TLS configuration that trusts only the certificate
// authorities in the PEM file name, for WithTLSConfig: a server with a
// certificate from a private CA.
func LoadCAFile(name string) (*tls.Config, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s: %w", name, errNoCertificates)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

var errNoCertificates = errors.New("no PEM certificate in it")
