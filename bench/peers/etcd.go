package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// ensureEtcd returns the etcd binary to run: given, else etcd on PATH,
// else the one Debian's etcd-server package installs, installed now.
func ensureEtcd(ctx context.Context, given string, log io.Writer) (string, error) {
	if given != "" {
		return given, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", errors.New("no etcd on PATH and no apt-get to install it: install etcd, or give --etcd")
	}
	fmt.Fprintln(log, "peers: no etcd on PATH: installing etcd-server from Debian's packages")
	var sudo []string
	if os.Geteuid() != 0 {
		sudo = []string{"sudo"}
	}
	// The lock timeout: an apt run elsewhere on the machine should delay us, not fail us.
	for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", "etcd-server"}} {
		argv := append(append(sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-o", "DPkg::Lock::Timeout=300"), args...)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", errors.New("installed etcd-server, but still no etcd on PATH")
	}
	return p, nil
}

// etcdVersion is the first line of `etcd --version`, "etcd Version: 3.4.23".
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "etcd of unknown version (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// etcdServer is one etcd member started for one cell, on an empty data
// folder, with its default settings: the write-ahead log synced before a
// write is answered, as leasekeeper's SQLite file and PostgreSQL are.
type etcdServer struct {
	proc     *process
	endpoint string // host:port of its client URL
	spec     pairSpec
}

func startEtcd(ctx context.Context, bin, dir string, spec pairSpec) (*etcdServer, error) {
	// A free port can be taken by someone else between our probe and
	// etcd's bind: try again on others.
	var err error
	for attempt := range 3 {
		var e *etcdServer
		if e, err = startEtcdOn(ctx, bin, filepath.Join(dir, fmt.Sprintf("etcd-%d", attempt)), spec); err == nil {
			return e, nil
		}
		if ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

func startEtcdOn(ctx context.Context, bin, dir string, spec pairSpec) (_ *etcdServer, err error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p, err := startProcess("etcd", dir+".log", bin,
		"--name", "peers",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "peers="+peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr")
	if err != nil {
		return nil, err
	}
	e := &etcdServer{proc: p, endpoint: "127.0.0.1:" + strconv.Itoa(clientPort), spec: spec}
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	if err := e.ready(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// ready waits until the member answers a read.
func (e *etcdServer) ready(ctx context.Context) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if e.proc.exited() {
			return fmt.Errorf("etcd exited before it was ready; its log ends:\n%s", e.proc.tail())
		}
		try, stop := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(try, "peers/ready")
		stop()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd not ready after %v: %w", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *etcdServer) stop() error { return e.proc.stop() }

func (e *etcdServer) serverCPU() (time.Duration, bool) { return e.proc.cpu() }

// worker i is a client of its own (one gRPC connection, as a separate
// process would have) with a session of its own, which its mutexes hold
// their keys under.
func (e *etcdServer) worker(int) (worker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &etcdWorker{cli: cli, s: s, spec: e.spec}, nil
}

type etcdWorker struct {
	cli  *clientv3.Client
	s    *concurrency.Session
	spec pairSpec
}

// pair is concurrency.Mutex's Lock and Unlock on the name. The token is
// the create revision of the mutex's key, which etcd's lock recipe hands
// out in grant order: etcd's fencing token.
func (w *etcdWorker) pair(ctx context.Context, name string) (pairTimes, error) {
	var p pairTimes
	m := concurrency.NewMutex(w.s, "/peers/"+name)
	lctx, cancel := context.WithTimeout(ctx, w.spec.wait)
	p.start = time.Now()
	err := m.Lock(lctx)
	cancel()
	if err != nil {
		return p, fmt.Errorf("lock %s: %w", name, err)
	}
	p.acquired = time.Now()
	owner := pb.Compare(m.IsOwner())
	p.token = owner.GetCreateRevision()
	if w.spec.hold > 0 {
		time.Sleep(w.spec.hold)
	}
	p.releasing = time.Now()
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.Unlock(uctx); err != nil {
		return p, fmt.Errorf("unlock %s: %w", name, err)
	}
	p.end = time.Now()
	return p, nil
}

func (w *etcdWorker) close() {
	w.s.Close()
	w.cli.Close()
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
