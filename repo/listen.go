package repo

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Listen receives the payloads Notify sends, from every process sharing the
// database, until ctx ends. It keeps its own connection and
// reconnects after losing it; ready runs each time it is listening again,
// because notifications sent while it was not are lost for good and the
// caller must catch up by reading the state. PostgreSQL only.
func (d *DB) Listen(ctx context.Context, ready func(), fn func(payload string)) error {
	if !d.dialect.peers() {
		return errors.New("listen: only a database that servers share has notifications")
	}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		listened := false
		err := d.listenOnce(ctx, func() { listened = true; ready() }, fn)
		if ctx.Err() != nil {
			break
		}
		_ = err // the caller learns of the gap through ready
		if listened {
			backoff = 50 * time.Millisecond // a new outage starts again from a short wait
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	return ctx.Err()
}

func (d *DB) listenOnce(ctx context.Context, ready func(), fn func(string)) error {
	cfg := d.pgcfg.Copy()
	cfg.Tracer = nil // the writer's round trips are counted, not the listener's
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, d.dialect.listen(d.channel)); err != nil {
		return err
	}
	ready()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			fn(n.Payload)
			continue
		}
		if ctx.Err() != nil || !pgconn.Timeout(err) {
			return err
		}
		// Quiet for a while: make sure the connection is alive, for a
		// connection cut off without a word (a dead host, a partition)
		// looks just like a quiet one. Notifications arriving meanwhile
		// are kept for the next wait.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = conn.Exec(pctx, d.texts[qPing])
		cancel()
		if err != nil {
			return err
		}
	}
}

// qPing checks that a connection is alive.
var qPing = portable("Ping", `SELECT 1`)

// listenIdle is how long the listener waits for a notification before it
// checks its connection.
const listenIdle = 15 * time.Second
