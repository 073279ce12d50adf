package tools

import (
	"encoding/json"
	"testing"
)

func TestDecodeArgs(t *testing.T) {
	type pageArgs struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
	}
	cases := []struct {
		name    string
		args    string
		want    pageArgs
		wantErr string
	}{
		{name: "all given", args: `{"path":"a.txt","offset":3}`, want: pageArgs{Path: "a.txt", Offset: 3}},
		{name: "absent is zero", args: `{"path":"a.txt"}`, want: pageArgs{Path: "a.txt"}},
		{name: "unknown keys ignored", args: `{"path":"a.txt","extra":true}`, want: pageArgs{Path: "a.txt"}},
		// The schema said integer and the registry let 1e30 through; an int
		// cannot hold it, and the error says which tool's arguments failed.
		{name: "too large for the struct", args: `{"path":"a.txt","offset":1e30}`,
			wantErr: `read_file: json: cannot unmarshal number 1e30 into Go struct field pageArgs.offset of type int`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeArgs[pageArgs]("read_file", Invocation{Args: json.RawMessage(tc.args)})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
