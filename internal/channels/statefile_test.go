package channels_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/channels"
)

func TestStateFileRoundTrip(t *testing.T) {
	type state struct {
		Next  int      `json:"next"`
		Items []string `json:"items"`
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	tests := []struct {
		name      string
		content   *string // nil: no file
		wantFound bool
		wantErr   error
		want      state
	}{
		{name: "missing", wantFound: false},
		{name: "valid", content: ptr(`{"next":3,"items":["a"]}`), wantFound: true, want: state{Next: 3, Items: []string{"a"}}},
		{name: "corrupt", content: ptr(`{"next":`), wantFound: true, wantErr: channels.ErrCorruptState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = os.Remove(path)
			if tt.content != nil {
				if err := atomicfile.Write(path, []byte(*tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("written file: %v %v", fi, err)
				}
			}
			var got state
			found, err := channels.ReadStateFile(path, &got)
			if found != tt.wantFound || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("found %v err %v, want %v %v", found, err, tt.wantFound, tt.wantErr)
			}
			if tt.wantErr == nil && (got.Next != tt.want.Next || len(got.Items) != len(tt.want.Items)) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".state.json.tmp-*")); len(left) != 0 {
		t.Errorf("temp files left behind: %v", left)
	}
}

func ptr(s string) *string { return &s }
