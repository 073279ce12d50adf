package telegram

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"go.uber.org/zap"
)

// BenchmarkJournalSnapshot encodes a journal holding 100 unacknowledged
// updates, as the gateway does on every getUpdates batch and every burst of
// acks while 100 chats have a turn in flight.
func BenchmarkJournalSnapshot(b *testing.B) {
	j := newJournal("", zap.NewNop())
	for i := range 100 {
		id := int64(1000 + i)
		raw := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"Bench"},`+
			`"chat":{"id":-1001000000000,"type":"supergroup","title":"bench"},"date":1767225600,"text":"How are things going today? Tell me something short."}}`, id, i, 5000000000+i)
		j.pending[id] = json.RawMessage(raw)
	}
	j.next = 1100
	b.ReportAllocs()
	for b.Loop() {
		j.mu.Lock()
		_ = j.snapshotLocked()
		j.mu.Unlock()
	}
}

// TestSnapshotIsWhatMarshalWrites checks the hand-written encoding against
// json.Marshal of journalFile, including an empty journal and updates with
// whitespace in them (webhook bodies are kept as received).
func TestSnapshotIsWhatMarshalWrites(t *testing.T) {
	tests := []struct {
		name    string
		next    int64
		pending map[int64]string
	}{
		{"empty", 0, nil},
		{"one", 7, map[int64]string{6: `{"update_id":6}`}},
		{"sorted by id", 12, map[int64]string{11: `{"update_id":11}`, 3: `{"update_id":3,"message":{"text":"a \"b\""}}`, 9: "{\n  \"update_id\": 9\n}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJournal("", zap.NewNop())
			j.next = tt.next
			for id, raw := range tt.pending {
				j.pending[id] = json.RawMessage(raw)
			}
			got := j.snapshotLocked()
			var back journalFile
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("snapshot is not JSON: %v\n%s", err, got)
			}
			want := journalFile{NextOffset: tt.next, Pending: []json.RawMessage{}}
			for _, id := range slices.Sorted(maps.Keys(tt.pending)) {
				want.Pending = append(want.Pending, json.RawMessage(tt.pending[id]))
			}
			wantJSON, _ := json.Marshal(want)
			gotJSON, _ := json.Marshal(back) // compacts both the same way
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("snapshot decodes to %s, want %s", gotJSON, wantJSON)
			}
		})
	}
}
