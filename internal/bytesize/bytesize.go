// Package bytesize writes byte counts for people and for the model: the
// sizes of sessions (/status), of attachments and files, and the limits
// they are held to. There is one format so that a file "20.4 MiB" and a
// limit "20.0 MiB" can be compared at a glance wherever they are shown.
//
// The units are binary (IEC: KiB, MiB, GiB): the limits in the
// configuration are powers of two (20 << 20 bytes is "20.0 MiB", where
// decimal units would say "21.0 MB"). One decimal is kept so that a size
// just over a limit does not read as equal to it.
//
// It is a leaf (no imports of this module), so every layer may use it.
package bytesize

import "strconv"

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// Format writes n bytes as "512 B", "2.0 KiB", "20.0 MiB" or "1.5 GiB".
func Format(n int64) string {
	switch {
	case n >= gib:
		return unit(n, gib, " GiB")
	case n >= mib:
		return unit(n, mib, " MiB")
	case n >= kib:
		return unit(n, kib, " KiB")
	}
	return strconv.FormatInt(n, 10) + " B"
}

func unit(n, size int64, name string) string {
	return strconv.FormatFloat(float64(n)/float64(size), 'f', 1, 64) + name
}
