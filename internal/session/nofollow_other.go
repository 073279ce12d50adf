//go:build !unix

package session

// oNoFollow is unavailable here; see nofollow_unix.go.
const oNoFollow = 0
