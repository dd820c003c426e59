// Package traffic is what the robustness tests send to the servers
// (docs/robustness.md): the recording client, which sends each operation
// through the project's Go client and records it in a history with its
// call and return times and whether its outcome is unknown (Client); the
// lock workload its workers run, lapse-free or with leases abandoned to
// lapse, and its final reads (Workload); and a workload with kill -9s at
// set moments (Scenario).
package traffic
