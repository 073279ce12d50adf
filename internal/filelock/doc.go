// Package filelock takes exclusive advisory locks (flock) on lock files, so
// that processes sharing a workspace on one volume (the agent workers and the
// channels process of a split gateway) can make a read-check-write of a
// shared file one step, as a mutex does within a process.
//
// A lock is held by an open file description: two opens of the same lock
// file exclude each other even inside one process, so goroutines and
// processes are kept apart alike. The kernel drops the lock when its holder
// dies, so a killed process never leaves a stale lock behind. WithMutex
// pairs a file's lock with the mutex guarding a process's copy of what the
// file holds (the jobs, the memory files).
//
// It imports nothing of this module; the schedule's jobs file, the memory
// files, the web panel's edits and the pairing file use it.
package filelock
