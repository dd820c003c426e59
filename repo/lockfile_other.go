//go:build !unix

package repo

import "os"

// tryLock has no lock to take where there is no flock: there, one server
// per SQLite file is the operator's to ensure (docs/deployment.md). The lock
// file is still created and carries the pid, for a person to see.
func tryLock(f *os.File) (held bool, err error) { return true, nil }

func checkGuarded(path string) error { return nil }

// guardFile has no flock to take either (see tryLock).
func (l *fileLock) guardFile(path string) error { return nil }

func (l *fileLock) unguard() {}
