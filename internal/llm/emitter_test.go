package llm

import (
	"errors"
	"testing"
)

func TestEmitter(t *testing.T) {
	text := Delta{Kind: DeltaText, Text: "hi"}
	done := Delta{Kind: DeltaDone}
	tests := []struct {
		name    string
		run     func(e *Emitter) []bool
		stopAt  int // the consumer refuses the delta with this Seq (0: never)
		want    []DeltaKind
		results []bool
	}{
		{"start goes first and once", func(e *Emitter) []bool { return []bool{e.Emit(text), e.Start(), e.Emit(done)} }, 0,
			[]DeltaKind{DeltaStart, DeltaText, DeltaDone}, []bool{true, true, false}},
		{"nothing after a terminal", func(e *Emitter) []bool {
			return []bool{e.Emit(done), e.Emit(text), e.Start()}
		}, 0, []DeltaKind{DeltaStart, DeltaDone}, []bool{false, false, false}},
		{"fail ends the stream", func(e *Emitter) []bool { e.Fail(errors.New("boom")); return []bool{e.Emit(text), e.Done()} }, 0,
			[]DeltaKind{DeltaStart, DeltaError}, []bool{false, true}},
		{"a consumer that stops is not called again", func(e *Emitter) []bool {
			return []bool{e.Emit(text), e.Emit(text), e.Done()}
		}, 2, []DeltaKind{DeltaStart, DeltaText}, []bool{false, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Delta
			e := NewEmitter(func(d Delta) bool {
				got = append(got, d)
				return d.Seq != tt.stopAt
			}, Meta{Provider: "p"})
			e.SetModel("m")
			results := tt.run(e)
			if len(got) != len(tt.want) {
				t.Fatalf("yielded %v, want kinds %v", got, tt.want)
			}
			for i, d := range got {
				if d.Kind != tt.want[i] || d.Seq != i+1 {
					t.Errorf("delta %d = kind %v seq %d, want kind %v seq %d", i, d.Kind, d.Seq, tt.want[i], i+1)
				}
			}
			if m := got[0].Meta; m == nil || m.Provider != "p" || m.Model != "m" {
				t.Errorf("start meta = %+v", m)
			}
			for i := range results {
				if results[i] != tt.results[i] {
					t.Errorf("result %d = %v, want %v", i, results[i], tt.results[i])
				}
			}
		})
	}
}
