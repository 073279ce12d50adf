package main

import (
	"slices"
	"testing"
)

func TestFileMappings(t *testing.T) {
	tests := []struct {
		name    string
		maps    string
		want    []iovec
		wantErr bool
	}{
		{
			name: "only file-backed ranges",
			maps: `00400000-00c00000 r-xp 00000000 08:01 1234 /usr/local/bin/nanobot
00c00000-01400000 r--p 00800000 08:01 1234 /usr/local/bin/nanobot
01400000-01500000 rw-p 01000000 08:01 1234 /usr/local/bin/nanobot
01500000-01600000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0 
7ffc0000-7ffc1000 rw-p 00000000 00:00 0 [stack]
7ffd0000-7ffd2000 r-xp 00000000 00:00 0 [vdso]
`,
			want: []iovec{{0x400000, 0x800000}, {0xc00000, 0x800000}, {0x1400000, 0x100000}},
		},
		{name: "a path with spaces still counts", maps: "1000-2000 r--p 0 08:01 9 /tmp/my dir/nanobot\n", want: []iovec{{0x1000, 0x1000}}},
		{name: "empty", maps: "", want: nil},
		{name: "bad range", maps: "zz-2000 r--p 0 08:01 9 /bin/x\n", wantErr: true},
		{name: "reversed range", maps: "2000-1000 r--p 0 08:01 9 /bin/x\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fileMappings([]byte(tt.maps))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %x, want %x", got, tt.want)
			}
		})
	}
}
