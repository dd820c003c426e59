package repo

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkStatement measures the fixed cost of one prepared statement on the
// pinned connection, the unit every operation's cost is counted in.
func BenchmarkStatement(b *testing.B) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	tx, _ := d.Begin(ctx)
	for i := 0; i < 10000; i++ {
		LockCreate(tx, fmt.Sprintf("L%d", i), 1)
	}
	tx.Commit()
	b.Run("begin-commit", func(b *testing.B) {
		for b.Loop() {
			tx, _ := d.Begin(ctx)
			tx.Commit()
		}
	})
	tx, _ = d.Begin(ctx)
	defer tx.Rollback()
	b.Run("select-1", func(b *testing.B) {
		var one int
		for b.Loop() {
			tx.row(qPing, nil, &one)
		}
	})
	b.Run("request-state", func(b *testing.B) {
		for b.Loop() {
			RequestStateGet(tx, "c", "L5000")
		}
	})
	b.Run("pk-miss", func(b *testing.B) {
		for b.Loop() {
			ClientWaitingFor(tx, "nope")
		}
	})
	b.Run("update", func(b *testing.B) {
		for b.Loop() {
			LockTakeToken(tx, "L5000")
		}
	})
	b.Run("register", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			ClientRegister(tx, fmt.Sprintf("c%d", i), int64(i), 0)
		}
	})
}
