package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Example starts a server on loopback, takes a lock, writes to the fenced
// store with the lease's token, reads the value back and releases; then a
// successor writes, and a late write with the first token is refused.
func Example() {
	ctx := context.Background()
	eng, err := engine.Open(ctx, repo.MemoryPath, engine.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()
	srv := server.New(eng, server.Options{})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	c := client.New(ts.URL)
	lease, err := c.Acquire(ctx, "exports/daily", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("etl-a holds token", lease.Token())
	if err := lease.Write(ctx, "part-1", "rows 1-100"); err != nil {
		fmt.Println(err)
	}
	read, err := c.Read(ctx, "exports/daily", "part-1")
	if err != nil || read.Value == nil {
		fmt.Println("read:", read, err)
	} else {
		fmt.Println("read:", *read.Value, "written with token", read.Token)
	}
	if err := lease.Release(ctx); err != nil {
		fmt.Println(err)
	}

	next, err := c.Acquire(ctx, "exports/daily", client.AcquireOptions{Client: "etl-b", TTL: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Release(ctx)
	fmt.Println("etl-b holds token", next.Token())
	next.Write(ctx, "part-1", "rows 1-120")
	err = lease.Write(ctx, "part-1", "rows 1-100, late")
	fmt.Println("late write is stale:", errors.Is(err, client.ErrStaleToken))
	// Output:
	// etl-a holds token 1
	// read: rows 1-100 written with token 1
	// etl-b holds token 2
	// late write is stale: true
}
