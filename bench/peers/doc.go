// Command peers measures leasekeeper side by side with etcd, the service
// its users would otherwise pick, under the same load, in one run: a
// comparison anyone can rerun on their own machine (README.md beside this
// file says how, and what each figure means).
//
//	cd bench/peers
//	go run . --rounds 5                                  # the full table, 5 s per row
//	go run . --old-leasekeeper OLD/leasekeeper --rounds 5 # also a build from before a change
//	go run . --duration 1s --clients 1,16 --hot 16       # a quick look
//
// It is a module of its own, so that leasekeeper's go.mod gains no etcd or
// gRPC dependency; it talks to leasekeeper over plain HTTP and imports
// nothing of it.
package main
