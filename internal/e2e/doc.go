// Package e2e is the robustness tests of leasekeeper, after etcd's
// tests/robustness (docs/robustness.md). Its tests are the scenarios: real
// `leasekeeper serve` processes under a workload and faults, their
// histories checked; the failpoint runs (TestFailpointsCaught, with -tags
// failpoints); and the soak (TestSoak, with LEASEKEEPER_SOAK).
//
// The framework is split as etcd's is:
//
//   - cluster: starting serve, and the faults of a process and of its
//     database (kill -9, pause, restart, a full disk, a proxy to
//     PostgreSQL, a standby to crash and promote), and a job process;
//   - traffic: the recording client and the workloads;
//   - history: what a run records, operations and faults, which the
//     others share;
//   - model: the porcupine model of the API, apart from internal/model;
//   - validate: the checks, porcupine's among them (Verify);
//   - report: what a run writes out (the history, porcupine's picture,
//     the end of a server's log).
package e2e
