package repo

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen receives the payloads Notify sends, from every process sharing the
// database, until ctx ends. It keeps its own connection and
// reconnects after losing it; ready runs each time it is listening again,
// because notifications sent while it was not are lost for good and the
// caller must catch up by reading the state. PostgreSQL only.
func (d *DB) Listen(ctx context.Context, ready func(), fn func(payload string)) error {
	if d.dialect != postgresDialect {
		return errors.New("listen: only a PostgreSQL database has notifications")
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
	conn, err := pgx.ConnectConfig(ctx, d.pgcfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel}.Sanitize()); err != nil {
		return err
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
