// Package e2e is the robustness framework of leasekeeper, after etcd's
// tests/robustness (docs/robustness.md): a cluster of real `leasekeeper
// serve` processes to start, stop, kill -9, pause and restart (package
// cluster); a
// client that records every operation with its invoke and return times and
// whether its outcome is unknown (Client, History); checkers of what must
// hold whatever happened (CheckInvariants); and a model of the API for
// porcupine's linearizability checker (CheckLinearizable), for workloads in
// which no lease lapses (Workload).
//
// It is test support for this repository's own tests: it is not for import
// by other modules, and its API is not stable.
package e2e
