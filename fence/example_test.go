package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/leasekeeper/leasekeeper/fence"
)

// Example is docs/fencing.md's "From Go", run on a SQLite file: a job with
// token 2 writes; a stale job with token 1 is refused, and nothing of its
// transaction is written.
func Example() {
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir) // the doc's code names jobs.db, in the working directory
	os.Setenv(fence.EnvServiceID, "9f1c0b7e5d2a4c3b8e6f1a0d7c4b2e9f")
	os.Setenv(fence.EnvLock, "exports/daily")
	os.Setenv(fence.EnvToken, "2")
	ctx := context.Background()
	if err := example(ctx); err != nil {
		fmt.Println(err)
	}
	os.Setenv(fence.EnvToken, "1") // a job that stalled past its lease
	if err := example(ctx); err != nil {
		fmt.Println(err)
	}
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "jobs.db"))
	defer db.Close()
	var n int
	db.QueryRow(`SELECT count(*) FROM orders`).Scan(&n)
	fmt.Println("orders:", n)
	// Output:
	// refused: fence: stale token: "orders" was written with token 2 of lock "exports/daily", newer than this job's 1 (token 1, newer 2)
	// orders: 1
}

func example(ctx context.Context) error {
	log.SetFlags(0)
	log.SetOutput(os.Stdout)
	if _, err := os.Stat("jobs.db"); err != nil {
		db, _ := sql.Open("sqlite", "file:jobs.db")
		db.Exec(`CREATE TABLE orders (id INTEGER, note TEXT)`)
		db.Close()
	}
	// The code of docs/fencing.md, "From Go", from here:
	db, err := sql.Open("sqlite", "file:jobs.db?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	if err := fence.Install(ctx, db, fence.SQLite); err != nil {
		return err
	}
	tok, err := fence.FromEnv() // under leasekeeper exec; else fence.Token{Service, Lock, Token}
	if err != nil {
		return err
	}
	err = fence.InTx(ctx, db, fence.SQLite, tok, "orders", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES (1, 'from etl-a')`)
		return err
	})
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		// A successor has written: this job's lease is gone. Stop; nothing was written.
		log.Printf("refused: %v (token %d, newer %d)", stale, stale.Token, stale.Newer)
	}
	// to here.
	db.Close()
	return nil
}
