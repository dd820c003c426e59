// Package mytest gives each test its own empty MySQL/MariaDB database, so
// that tests share one server without seeing each other's tables: the
// MySQL twin of internal/pgtest. Its API is not stable.
package mytest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvVar names the server the tests use: a go-sql-driver/mysql DSN
// (user@tcp(host:port)/) of a server on which they may create databases.
const EnvVar = "LEASEKEEPER_TEST_MYSQL"

const howTo = "Run `bash .ci/run`, which installs and starts a throwaway MariaDB; " +
	"or start one with `.ci/mariadb start` and export " + EnvVar + "=<the DSN it prints>."

// DSN returns the DSN of a fresh, empty database for one test, dropped when
// the test ends. Without EnvVar the test is skipped, except in CI (CI set),
// which never skips: .ci/run starts a server.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvVar)
	if base == "" || base == "skip" {
		if os.Getenv("CI") != "" {
			t.Fatalf("mytest: %s is not set, and CI never skips the MySQL tests. %s", EnvVar, howTo)
		}
		t.Skipf("mytest: skipped, since %s is not set. %s", EnvVar, howTo)
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("mytest: %s: %v", EnvVar, err)
	}
	var b [8]byte
	rand.Read(b[:])
	name := "lktest_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := cfg.Clone()
	server.DBName = ""
	if err := exec(ctx, server.FormatDSN(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("mytest: %v\n%s", err, howTo)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, server.FormatDSN(), "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("mytest: %v", err)
		}
	})
	db := cfg.Clone()
	db.DBName = name
	return db.FormatDSN()
}

func exec(ctx context.Context, dsn, q string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}
