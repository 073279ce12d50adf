package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/filelock"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// ChatCheck is the daemon's half of the cron tool's checks, for a job that
// did not come through the tool: its chat must be one a turn could have
// created it in (a channel that takes runs, a sender the channel's access
// policy lets in, a session key that is this chat's). It returns the chat
// to keep, its routing metadata taken from the session key rather than
// from the file, or why the job is refused.
type ChatCheck func(Chat) (Chat, error)

// Migrate moves the jobs of the workspace's old jobs file
// (workspace.LegacyJobsFile, a row of workspace.DaemonFiles: every confined
// command may write there, so its entries are hostile input), read through
// the workspace's confined layer under workspace.MaxLegacyJobsBytes, into
// the scheduler's own file, once: only while that file does not exist yet,
// under its lock, so one process of a split gateway does it. Every entry passes the checks the cron tool makes (a valid
// schedule, the minimum interval, the message's size, the per-chat limit)
// and check; entries that fail are dropped with a log line. Then the old
// file is removed, and it is never read again, whatever a command writes
// there later. It returns how many jobs were moved.
func (c *Cron) Migrate(ws *workspace.Files, check ChatCheck) (int, error) {
	unlock, err := filelock.WithMutex(&c.mu, c.lockFileLocked)
	if err != nil {
		return 0, fmt.Errorf("cron: migrate: %w", err)
	}
	defer unlock()
	if c.seen != nil {
		return 0, nil // the scheduler's file exists: migrated before, or never needed
	}
	root := ws
	legacy := filepath.Join(ws.Dir(), workspace.LegacyJobsFile)
	// Hostile input: no link out, a regular file only (opened without
	// blocking, so a FIFO cannot hang the start), at most workspace.MaxLegacyJobsBytes.
	data, err := ws.ReadFile(workspace.LegacyJobsFile, workspace.MaxLegacyJobsBytes)
	if errors.Is(err, os.ErrNotExist) {
		return 0, c.markMigratedLocked()
	}
	if err != nil {
		c.log.Error("old workspace jobs file unreadable; not migrated, never read again", zap.String("file", legacy), zap.Error(err))
		return 0, c.finishMigrationLocked(root, legacy)
	}
	var f jobsFile
	if err := json.Unmarshal(data, &f); err != nil {
		c.log.Error("old workspace jobs file is not a jobs file; not migrated, never read again", zap.String("file", legacy), zap.Error(err))
		return 0, c.finishMigrationLocked(root, legacy)
	}
	moved := 0
	for i, raw := range f.Jobs {
		j, err := c.admit(raw, check)
		if err != nil {
			c.log.Warn("old workspace job dropped: it fails the cron tool's checks", zap.Int("entry", i+1), zap.Error(err))
			continue
		}
		c.jobs[j.ID] = j
		moved++
	}
	if err := c.finishMigrationLocked(root, legacy); err != nil {
		return 0, err
	}
	c.log.Info("cron jobs moved out of the workspace; the workspace file is never read again",
		zap.String("from", legacy), zap.String("to", c.cfg.Path), zap.Int("moved", moved), zap.Int("dropped", len(f.Jobs)-moved))
	c.poke()
	return moved, nil
}

// admit decodes one entry of the workspace file and checks it as the cron
// tool checks a new job.
func (c *Cron) admit(raw json.RawMessage, check ChatCheck) (*Job, error) {
	j, err := decodeJob(raw)
	if err != nil {
		return nil, err
	}
	switch n := len([]rune(j.Message)); {
	case n == 0:
		return nil, fmt.Errorf("job %s: no message", j.ID)
	case n > c.cfg.MaxMessage:
		return nil, fmt.Errorf("job %s: message of %d characters; at most %d are allowed", j.ID, n, c.cfg.MaxMessage)
	}
	switch {
	case j.Schedule.Kind == KindEvery && time.Duration(j.Schedule.Every) < c.cfg.MinInterval:
		return nil, fmt.Errorf("job %s: every %s, shorter than the minimum %s", j.ID, time.Duration(j.Schedule.Every), c.cfg.MinInterval)
	case j.Schedule.Kind == KindCron && j.Schedule.sched.Next(c.clock.Now()).IsZero():
		return nil, fmt.Errorf("job %s: cron expression %q never matches", j.ID, j.Schedule.Expr)
	case c.jobs[j.ID] != nil:
		return nil, fmt.Errorf("job %s: id used twice", j.ID)
	}
	if Scheduled(j.Chat.Metadata) {
		// The tool strips these; a job carrying them claims to be a run.
		delete(j.Chat.Metadata, MetaSource)
		delete(j.Chat.Metadata, MetaJobID)
	}
	chat := j.Chat
	if check != nil {
		if chat, err = check(j.Chat); err != nil {
			return nil, fmt.Errorf("job %s for %s: %w", j.ID, j.Chat.Key(), err)
		}
	}
	if n := len(c.chatJobs(chat.Key())); n >= c.cfg.MaxJobsPerChat {
		return nil, fmt.Errorf("job %s: chat %s already has %d jobs, the limit", j.ID, chat.Key(), n)
	}
	j.Chat = chat
	return j, nil
}

// finishMigrationLocked saves the migrated jobs (which makes the
// scheduler's file exist, the mark that migration is done) and removes the
// workspace file, so no chat's command reads another chat's reminders there.
func (c *Cron) finishMigrationLocked(root *workspace.Files, legacy string) error {
	if err := c.markMigratedLocked(); err != nil {
		return err
	}
	// Remove unlinks what is at the path, a link included, never its target.
	if err := root.Remove(workspace.LegacyJobsFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Warn("cannot remove the old workspace jobs file; it is not read again", zap.String("file", legacy), zap.Error(err))
	}
	return nil
}

// markMigratedLocked writes the scheduler's file, empty if need be.
func (c *Cron) markMigratedLocked() error {
	if err := c.saveLocked(); err != nil {
		return fmt.Errorf("cron: migrate: %w", err)
	}
	return nil
}
