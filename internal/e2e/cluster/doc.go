// Package cluster starts `leasekeeper serve` processes for the robustness
// tests (docs/robustness.md) and does to them the faults of a process and
// of its database: kill -9, SIGTERM, SIGSTOP and SIGCONT, a start again on
// the same address, a file size limit (a full disk), a TCP proxy to
// PostgreSQL that cuts or slows the connections, a PostgreSQL primary with
// a synchronous standby to crash and promote; and a job, a client process
// of a scenario, to stop and continue. Each fault is noted in the history
// the cluster is given (package history).
//
// A Cluster is started by a test (Start, which fails the test on error) or
// by a command (StartCluster, which returns the error: cmd/lkload).
package cluster
