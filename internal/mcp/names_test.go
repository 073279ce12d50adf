package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name   string
		server string
		remote []string
		want   map[string]string
	}{
		{"valid names are kept", "gh", []string{"search_issues", "get-file"},
			map[string]string{"search_issues": "mcp_gh_search_issues", "get-file": "mcp_gh_get-file"}},
		{"invalid characters become _", "fs", []string{"files.read/v2", "größe", "a b", ""},
			map[string]string{"files.read/v2": "mcp_fs_files_read_v2", "größe": "mcp_fs_gr__e", "a b": "mcp_fs_a_b", "": "mcp_fs__"}},
		{"a collision leaves the valid name plain and suffixes the other", "fs", []string{"a_b", "a.b"},
			map[string]string{"a_b": "mcp_fs_a_b", "a.b": "mcp_fs_a_b_" + hash8("a.b")}},
		{"colliding sanitised names are all suffixed", "fs", []string{"a.b", "a/b"},
			map[string]string{"a.b": "mcp_fs_a_b_" + hash8("a.b"), "a/b": "mcp_fs_a_b_" + hash8("a/b")}},
		{"a long name is cut and suffixed", "srv", []string{long},
			map[string]string{long: "mcp_srv_" + strings.Repeat("x", 64-8-9) + "_" + hash8(long)}},
		{"long names that share a prefix stay distinct", "srv", []string{long + "1", long + "2"},
			map[string]string{
				long + "1": "mcp_srv_" + strings.Repeat("x", 64-8-9) + "_" + hash8(long+"1"),
				long + "2": "mcp_srv_" + strings.Repeat("x", 64-8-9) + "_" + hash8(long+"2"),
			}},
		{"exactly 64 characters fit", "s", []string{strings.Repeat("y", 64-6)},
			map[string]string{strings.Repeat("y", 64-6): "mcp_s_" + strings.Repeat("y", 64-6)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := toolNames(tc.server, tc.remote)
			for r, want := range tc.want {
				if got[r] != want {
					t.Errorf("%q -> %q, want %q", r, got[r], want)
				}
				if !validName.MatchString(got[r]) {
					t.Errorf("%q -> %q is not a valid tool name", r, got[r])
				}
			}
			// The mapping does not depend on the order of the list.
			rev := slices.Clone(tc.remote)
			slices.Reverse(rev)
			again := toolNames(tc.server, rev)
			for r := range tc.want {
				if again[r] != got[r] {
					t.Errorf("order changed %q: %q then %q", r, got[r], again[r])
				}
			}
		})
	}
}

// hash8 is the first 8 hex digits of the SHA-256 of s.
func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}
