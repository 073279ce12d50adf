package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Job is one scheduled job. Its JSON shape is the jobs.json file format.
type Job struct {
	ID string `json:"id"`
	// Message is the instruction the model wrote for the run: what to do or
	// what to remind the user of.
	Message   string    `json:"message"`
	Schedule  Spec      `json:"schedule"`
	Chat      Chat      `json:"chat"`
	CreatedAt time.Time `json:"created_at"`
	// NextRun is when the job is due next; a one-shot keeps its time until
	// its run is recorded in the chat's session, then it is removed.
	NextRun time.Time `json:"next_run"`
	LastRun time.Time `json:"last_run,omitzero"`
	Runs    int       `json:"runs,omitempty"`
}

// Chat is where a job's runs go: the chat whose turn created the job.
type Chat struct {
	Channel  string `json:"channel"`
	ChatID   string `json:"chat_id"`
	SenderID string `json:"sender_id,omitempty"`
	// SessionKey is the creating turn's session (a Telegram topic or a
	// Discord thread has its own).
	SessionKey string `json:"session_key,omitempty"`
	// Metadata is the channel's routing metadata (thread and topic ids),
	// echoed on the run so the reply lands in the same place.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Key is the session key of the chat, as bus.InboundMessage.Key computes it.
func (c Chat) Key() string {
	if c.SessionKey != "" {
		return c.SessionKey
	}
	return c.Channel + ":" + c.ChatID
}

// fileVersion is the jobs.json format this code writes and reads.
const fileVersion = 1

type jobsFile struct {
	Version int               `json:"version"`
	Jobs    []json.RawMessage `json:"jobs"`
}

// loaded is what a jobs file held: the usable jobs, and the entries that
// could not be used, kept verbatim so saving never drops them.
type loaded struct {
	// info is the file that was read (nil: there was none), to tell later
	// whether it was replaced since.
	info   os.FileInfo
	jobs   []*Job
	broken []json.RawMessage
	// problems explain each broken entry, for the log.
	problems []string
}

// errCorrupt marks a jobs file that is not JSON of the expected shape.
var errCorrupt = errors.New("not a jobs file")

// readJobs reads path; a missing file holds no jobs.
func readJobs(path string) (loaded, error) {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return loaded{}, nil
	}
	if err != nil {
		return loaded{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer func() { _ = fh.Close() }()
	// The file's identity is taken from the open file, not the path: the
	// path may be replaced meanwhile, and that must read as a change.
	info, err := fh.Stat()
	if err != nil {
		return loaded{}, fmt.Errorf("read %s: %w", path, err)
	}
	data, err := io.ReadAll(fh)
	if err != nil {
		return loaded{}, fmt.Errorf("read %s: %w", path, err)
	}
	var f jobsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return loaded{}, fmt.Errorf("read %s: %w: %v", path, errCorrupt, err)
	}
	if f.Version > fileVersion {
		return loaded{}, fmt.Errorf("read %s: format version %d is newer than this nanobot understands (%d); upgrade nanobot",
			path, f.Version, fileVersion)
	}
	l := loaded{info: info}
	seen := map[string]bool{}
	for i, raw := range f.Jobs {
		j, err := decodeJob(raw)
		if err == nil && seen[j.ID] {
			err = fmt.Errorf("id %q is used twice", j.ID)
		}
		if err != nil {
			l.broken = append(l.broken, raw)
			l.problems = append(l.problems, fmt.Sprintf("entry %d: %v", i+1, err))
			continue
		}
		seen[j.ID] = true
		l.jobs = append(l.jobs, j)
	}
	return l, nil
}

func decodeJob(raw json.RawMessage) (*Job, error) {
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, err
	}
	switch {
	case j.ID == "":
		return nil, errors.New("no id")
	case j.Chat.Channel == "" || j.Chat.ChatID == "":
		return nil, fmt.Errorf("job %s: no chat to deliver to", j.ID)
	case j.NextRun.IsZero():
		return nil, fmt.Errorf("job %s: no next_run", j.ID)
	}
	if err := j.Schedule.compile(); err != nil {
		return nil, fmt.Errorf("job %s: %w", j.ID, err)
	}
	return &j, nil
}

// writeJobs replaces path with jobs (soonest first) and the broken entries.
func writeJobs(path string, jobs map[string]*Job, broken []json.RawMessage) error {
	list := make([]*Job, 0, len(jobs))
	for _, j := range jobs {
		list = append(list, j)
	}
	sortJobs(list)
	f := jobsFile{Version: fileVersion, Jobs: make([]json.RawMessage, 0, len(list)+len(broken))}
	for _, j := range list {
		raw, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("write %s: job %s: %w", path, j.ID, err)
		}
		f.Jobs = append(f.Jobs, raw)
	}
	f.Jobs = append(f.Jobs, broken...)
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// moveAside renames a file that cannot be read as jobs, so that the next
// save does not overwrite what the user may want to recover.
func moveAside(path string, now time.Time) (string, error) {
	dst := path + ".corrupt-" + now.UTC().Format("20060102-150405")
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	return dst, nil
}

func sortJobs(list []*Job) {
	slices.SortFunc(list, func(a, b *Job) int {
		if c := a.NextRun.Compare(b.NextRun); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
