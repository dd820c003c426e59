package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/auth"
)

// TestCheckListen: without an auth file only loopback is served, unless
// --insecure; the check needs no address to be bound.
func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr             string
		auth, insecure   bool
		wantErr, wantLBk bool
	}{
		{"127.0.0.1:7070", false, false, false, true},
		{"127.0.0.2:0", false, false, false, true},
		{"[::1]:7070", false, false, false, true},
		{"localhost:7070", false, false, false, true},
		{"0.0.0.0:7070", false, false, true, false},
		{":7070", false, false, true, false},
		{"[::]:7070", false, false, true, false},
		{"192.0.2.10:7070", false, false, true, false},
		{"locks.example:7070", false, false, true, false},
		{"0.0.0.0:7070", true, false, false, false},
		{"0.0.0.0:7070", false, true, false, false},
		{"192.0.2.10:7070", true, true, false, false},
		{"no-port", true, true, true, false},
	} {
		lb, err := checkListen(tc.addr, tc.auth, tc.insecure)
		var ue usageError
		if (err != nil) != tc.wantErr || (err != nil && !errors.As(err, &ue)) || lb != tc.wantLBk {
			t.Errorf("checkListen(%q, auth %v, insecure %v) = %v, %v; want loopback %v, error %v (a usageError)",
				tc.addr, tc.auth, tc.insecure, lb, err, tc.wantLBk, tc.wantErr)
		}
		if err != nil && tc.addr != "no-port" && !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("checkListen(%q): %v does not mention --insecure", tc.addr, err)
		}
	}
}

// TestSecuritySetupWarnings: --insecure beyond loopback and auth without TLS
// beyond loopback are logged as warnings; loopback is quiet.
func TestSecuritySetupWarnings(t *testing.T) {
	dir := t.TempDir()
	authPath := filepath.Join(dir, "auth.json")
	writeFile(t, authPath, `{"principals": [{"name": "ops", "token_sha256": "`+auth.HashToken("secret-admin-token")+`", "role": "admin"}]}`)
	for _, tc := range []struct {
		flags securityFlags
		addr  string
		want  string
	}{
		{securityFlags{}, "127.0.0.1:0", ""},
		{securityFlags{insecure: true}, "0.0.0.0:7070", "without authentication"},
		{securityFlags{authFile: authPath}, "0.0.0.0:7070", "clear text"},
		{securityFlags{authFile: authPath}, "127.0.0.1:0", ""},
	} {
		var buf strings.Builder
		log := slog.New(slog.NewTextHandler(&buf, nil))
		sec, err := tc.flags.setup(tc.addr, log)
		if err != nil {
			t.Errorf("setup(%+v, %s): %v", tc.flags, tc.addr, err)
			continue
		}
		warned := strings.Contains(buf.String(), "level=WARN")
		if (tc.want != "") != warned || !strings.Contains(buf.String(), tc.want) {
			t.Errorf("setup(%+v, %s) logged %q; want a warning saying %q", tc.flags, tc.addr, buf.String(), tc.want)
		}
		if (tc.flags.authFile != "") != (sec.Authorizer != nil) {
			t.Errorf("setup(%+v): Authorizer %v", tc.flags, sec.Authorizer)
		}
		if strings.Contains(buf.String(), "secret-admin-token") {
			t.Errorf("a token in the log: %s", buf.String())
		}
	}
}

// TestServeRefuses: serve stops at start, with a message naming the problem
// and exit status 2, before it opens the database or binds anything.
func TestServeRefuses(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	writeFile(t, good, `{"principals": [{"name": "ops", "token_sha256": "`+auth.HashToken("t")+`", "role": "admin"}]}`)
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, `{"principals": [{"name": "etl", "token_sha256": "`+auth.HashToken("t")+`", "role": "client"}]}`)
	db := filepath.Join(dir, "never.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:7070"}, "--insecure"},
		{[]string{"--listen", ":7070"}, "--auth-file"},
		{[]string{"--auth-file", bad}, `principal 1 ("etl")`},
		{[]string{"--auth-file", filepath.Join(dir, "missing.json")}, "auth file"},
		{[]string{"--auth-file", good, "--tls-cert", good}, "--tls-cert and --tls-key"},
		{[]string{"--auth-file", good, "--tls-cert", good, "--tls-key", good}, "--tls-cert/--tls-key"},
	} {
		args := append([]string{"serve", "--db", db}, tc.args...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("leasekeeper %s: exit %d, output %q; want 2 and %q", strings.Join(args, " "), code, out, tc.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a refused serve created the database (%v)", err)
	}
}

// TestCLIRevoke: revoke on a server without an auth file.
func TestCLIRevoke(t *testing.T) {
	bin := buildBinary(t)
	s := startCLIServer(t)
	expect(t, bin, s.url, 0, `{"outcome":"granted","token":1,...`, "acquire", "L", "--client", "a", "--ttl", "60")
	expect(t, bin, s.url, 75, `{"outcome":"queued","position":1}`, "acquire", "L", "--client", "b", "--ttl", "60")
	expect(t, bin, s.url, 0, `{"outcome":"revoked"}`, "revoke", "L", "--client", "a")
	expect(t, bin, s.url, 1, `{"error":"not_holder","message":"a holds no live lease on L"}`, "revoke", "L", "--client", "a")
	expect(t, bin, s.url, 0, `{"lock":"L","holders":[{"client":"b","mode":"exclusive","token":2,...`, "inspect", "L")
	if r := runCLI(t, bin, s.url, "revoke", "L"); r.code != 2 || r.stdout != "" {
		t.Errorf("revoke without --client: exit %d, stdout %q; want 2", r.code, r.stdout)
	}
}

// The tokens of TestTLSRoundTrip's principals.
const (
	tlsAdminToken  = "adm-tls-7c1f3a5e9b0d2c4e6f8a0b1c3d5e7f90"
	tlsClientToken = "cli-tls-2b4d6f8a0c1e3a5c7e9b1d3f5a7c9e12"
)

// TestTLSRoundTrip: a throwaway CA and server certificate, serve with TLS and
// an auth file, and the CLI (--ca-file, --auth-token or the environment) and
// the Go client (LoadCAFile, WithBearerToken) round trips over it, on
// loopback. No token appears in the server's log.
func TestTLSRoundTrip(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
	authPath := filepath.Join(dir, "auth.json")
	writeFile(t, authPath, `{"principals": [
	  {"name": "etl", "token_sha256": "`+auth.HashToken(tlsClientToken)+`", "clients": ["etl-*"], "role": "client"},
	  {"name": "ops", "token_sha256": "`+auth.HashToken(tlsAdminToken)+`", "role": "admin"}
	]}`)
	srv := startServe(t, bin, filepath.Join(dir, "tls.db"),
		"--auth-file", authPath, "--tls-cert", certFile, "--tls-key", keyFile)
	u := srv.URL()
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("serve with a certificate listens on %s", u)
	}

	// The CLI, the token from the environment.
	cli := func(code int, want string, env []string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd, stdout, stderr := cliCommand(ctx, bin, u, args...)
		cmd.Env = append(cmd.Env, env...)
		got := exitCode(cmd.Run())
		out := strings.TrimSuffix(stdout.String(), "\n")
		ok := out == want
		if prefix, cut := strings.CutSuffix(want, "..."); cut {
			ok = strings.HasPrefix(out, prefix)
		}
		if got != code || !ok {
			t.Errorf("leasekeeper %s: exit %d, stdout %q, stderr %q; want %d, %q", strings.Join(args, " "), got, stdout, stderr, code, want)
		}
		for _, tok := range []string{tlsAdminToken, tlsClientToken} {
			if strings.Contains(stdout.String()+stderr.String(), tok) {
				t.Errorf("leasekeeper %s printed a token", strings.Join(args, " "))
			}
		}
	}
	asClient := []string{"LEASEKEEPER_AUTH_TOKEN=" + tlsClientToken}
	unauthenticated := `{"error":"unauthenticated","message":"send a valid token: Authorization: Bearer TOKEN"}`
	cli(0, `{"outcome":"granted","token":1,...`, asClient, "acquire", "exports/daily", "--client", "etl-a", "--ttl", "60", "--ca-file", caFile)
	cli(0, `{"outcome":"ok"}`, asClient, "write", "exports/daily", "k", "v1", "--token", "1", "--ca-file", caFile)
	cli(1, `{"error":"forbidden","message":"principal etl may not act as client \"web-a\""}`,
		asClient, "acquire", "exports/daily", "--client", "web-a", "--ttl", "60", "--ca-file", caFile)
	cli(1, `{"error":"forbidden","message":"principal etl (client) may not revoke"}`,
		asClient, "revoke", "exports/daily", "--client", "etl-a", "--ca-file", caFile)
	cli(1, unauthenticated, nil, "locks", "--ca-file", caFile)
	cli(1, unauthenticated, asClient, "locks", "--ca-file", caFile, "--auth-token", "not-a-token")
	cli(1, unauthenticated, nil, "status", "etl-a", "--ca-file", caFile, "--auth-token", "not-a-token")
	// --auth-token wins over the environment.
	cli(0, `{"lock":"exports/daily","holders":[{"client":"etl-a","mode":"exclusive","token":1,...`,
		asClient, "locks", "--ca-file", caFile, "--auth-token", tlsAdminToken)
	cli(0, `{"outcome":"revoked"}`, nil, "revoke", "exports/daily", "--client", "etl-a", "--ca-file", caFile, "--auth-token", tlsAdminToken)
	// Without the CA, the server's certificate is not trusted: no answer.
	cli(3, "", asClient, "locks")
	// A bare host:port with --ca-file is https.
	cli(0, `{"value":"v1","token":1}`, asClient, "read", "exports/daily", "k", "--ca-file", caFile, "--server", strings.TrimPrefix(u, "https://"))
	cli(2, "", asClient, "locks", "--ca-file", caFile, "--server", "http://"+strings.TrimPrefix(u, "https://"))
	// exec passes the token along for its acquire, renewals and release.
	cli(0, "", asClient, "exec", "exports/daily", "--client", "etl-b", "--ttl", "5", "--ca-file", caFile, "--", "true")

	// The Go client. Its answers are checked against the OpenAPI document
	// (internal/apitest): the validating transport wraps one that trusts
	// the CA, as WithTLSConfig would make it (WithTLSConfig leaves a
	// transport that is not an *http.Transport alone).
	ctx := context.Background()
	cfg, err := client.LoadCAFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	trusting := http.DefaultTransport.(*http.Transport).Clone()
	trusting.TLSClientConfig = cfg
	validated := client.WithHTTPClient(&http.Client{Transport: apitest.New(t).Transport(t, trusting)})
	etl := client.New(u, validated, client.WithBearerToken(tlsClientToken))
	lease, err := etl.Acquire(ctx, "exports/daily", client.AcquireOptions{Client: "etl-c", TTL: 30 * time.Second})
	if err != nil {
		t.Fatalf("acquire over TLS: %v", err)
	}
	if err := lease.Write(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}
	ops := client.New(u, validated, client.WithBearerToken(tlsAdminToken))
	if res, err := ops.Revoke(ctx, "etl-c", "exports/daily"); err != nil || res.Outcome != lk.Revoked {
		t.Fatalf("revoke over TLS: %+v, %v", res, err)
	}
	if err := lease.Release(ctx); err != nil && !errors.Is(err, client.ErrNotHolder) {
		t.Errorf("releasing a revoked lease: %v", err)
	}
	if _, err := client.New(u, client.WithBearerToken(tlsAdminToken)).Locks(ctx, lk.LocksRequest{}); err == nil {
		t.Error("a client without the CA trusted the server's certificate")
	}
	_, err = client.New(u, validated).Locks(ctx, lk.LocksRequest{})
	var e *client.Error
	if !errors.Is(err, client.ErrUnauthenticated) || !errors.As(err, &e) || e.Status != 401 || e.Message != "send a valid token: Authorization: Bearer TOKEN" {
		t.Errorf("locks without a token over TLS: %v, want ErrUnauthenticated (401)", err)
	}
	// WithTLSConfig itself: the same answer, the one the validator checked.
	_, err2 := client.New(u, client.WithTLSConfig(cfg)).Locks(ctx, lk.LocksRequest{})
	var e2 *client.Error
	if !errors.As(err2, &e2) || *e2 != *e {
		t.Errorf("locks without a token over TLS, with WithTLSConfig: %v, want %v", err2, err)
	}
	_, err = etl.Revoke(ctx, "etl-a", "exports/daily")
	if !errors.Is(err, client.ErrForbidden) || !errors.As(err, &e) || e.Status != 403 || e.Message != "principal etl (client) may not revoke" {
		t.Errorf("revoke by a client principal over TLS: %v, want ErrForbidden (403)", err)
	}

	srv.Stop()
	logs := srv.Log()
	for _, tok := range []string{tlsAdminToken, tlsClientToken, "not-a-token"} {
		if strings.Contains(logs, tok) {
			t.Errorf("the server's log holds a token:\n%s", logs)
		}
	}
	if !strings.Contains(logs, `"principal":"etl"`) {
		t.Errorf("the server's log has no refusal of etl:\n%s", logs)
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeTestPKI writes a throwaway CA and a server certificate for 127.0.0.1
// and localhost, signed by it, into dir.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "leasekeeper test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "leasekeeper test server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return caFile, certFile, keyFile
}
