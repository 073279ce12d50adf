package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// CronTool is the cron tool (docs/schedule.md#the-tool): the model adds, lists
// and removes the current chat's jobs. Jobs are scoped to the chat (session)
// they were created in: one user never sees or removes another's.
type CronTool struct {
	cron *Cron
	// deliverable says whether runs can reach a chat of this channel; jobs
	// are refused elsewhere (the terminal, system turns).
	deliverable func(channel string) bool
}

var _ tools.Tool = (*CronTool)(nil)

// Tool returns the cron tool for c. deliverable reports whether a channel's
// chats can receive runs (nil: every channel).
func (c *Cron) Tool(deliverable func(channel string) bool) *CronTool {
	return &CronTool{cron: c, deliverable: deliverable}
}

// Spec describes the tool. The text is fixed (prompt caching).
func (*CronTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "cron",
		Description: "Schedule work for later in this chat: reminders, recurring checks, periodic reports. " +
			"action \"add\" needs \"message\" (what you will be told to do when it runs, e.g. \"Remind the user to call " +
			"the dentist\") and exactly one of: \"at\" (once: \"in 20m\", \"in 2h30m\", an RFC 3339 time such as " +
			"\"2025-06-01T09:00:00+02:00\", or a local time \"2025-06-01 09:00\" with \"tz\"), \"every\" (an interval " +
			"such as \"30m\" or \"24h\", at least 1m) or \"cron\" (five fields: minute hour day-of-month month " +
			"day-of-week, e.g. \"0 9 * * 1-5\", with \"tz\", an IANA zone such as \"Europe/Berlin\"; default UTC). " +
			"When a job runs you get its message as a new turn in this chat and your reply goes to the user. " +
			"\"list\" shows this chat's jobs; \"remove\" deletes one by \"id\". Jobs cannot create other jobs.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["add", "list", "remove"], "description": "What to do."},
    "message": {"type": "string", "description": "add: the instruction for the run, written to your future self."},
    "at": {"type": "string", "description": "add, once: \"in 20m\", an RFC 3339 time, or a local time with tz."},
    "every": {"type": "string", "description": "add, repeating: an interval such as \"45m\", \"2h\" or \"7d\"."},
    "cron": {"type": "string", "description": "add, repeating: a five-field cron expression such as \"30 8 * * 1-5\"."},
    "tz": {"type": "string", "description": "IANA time zone for cron and for a local at time, e.g. \"America/New_York\". Default UTC."},
    "id": {"type": "string", "description": "remove: the job's id, as shown by add and list."}
  },
  "required": ["action"]
}`),
	}
}

type cronArgs struct {
	Action  string `json:"action"`
	Message string `json:"message"`
	At      string `json:"at"`
	Every   string `json:"every"`
	Cron    string `json:"cron"`
	TZ      string `json:"tz"`
	ID      string `json:"id"`
}

// Run performs one action for the chat of the invocation.
func (t *CronTool) Run(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	a, err := tools.DecodeArgs[cronArgs]("cron", inv)
	if err != nil {
		return tools.Result{}, err
	}
	o := inv.Origin
	if o.Channel == "" || o.ChatID == "" {
		return failed("there is no current chat to schedule for."), nil
	}
	key := o.SessionKey
	if key == "" {
		key = o.Channel + ":" + o.ChatID
	}
	switch a.Action {
	case "add":
		return t.add(a, o, key), nil
	case "list":
		return t.list(key), nil
	case "remove":
		j, err := t.cron.Remove(key, a.ID)
		if err != nil {
			return failed(err.Error()), nil
		}
		return tools.Result{Text: fmt.Sprintf("Removed job %s (%s): %s", j.ID, j.Schedule.Describe(), preview(j.Message))}, nil
	}
	return failed(fmt.Sprintf(`unknown action %q: use "add", "list" or "remove".`, a.Action)), nil
}

func (t *CronTool) add(a cronArgs, o tools.Origin, key string) tools.Result {
	if Scheduled(o.Metadata) {
		return failed("this turn was started by a scheduled job or the heartbeat, and scheduled work cannot create " +
			"jobs. Do the task now instead; if the user wants another reminder, they can ask for it.")
	}
	if t.deliverable != nil && !t.deliverable(o.Channel) {
		return failed(fmt.Sprintf("jobs cannot be delivered to %s chats; they work in the chat apps the gateway serves "+
			"(Telegram, Discord).", o.Channel))
	}
	chat := Chat{Channel: o.Channel, ChatID: o.ChatID, SenderID: o.SenderID, SessionKey: key, Metadata: maps.Clone(o.Metadata)}
	delete(chat.Metadata, MetaSource)
	delete(chat.Metadata, MetaJobID)
	j, err := t.cron.Add(chat, When{At: a.At, Every: a.Every, Cron: a.Cron, TZ: a.TZ}, a.Message)
	if err != nil {
		return failed(err.Error())
	}
	now := t.cron.clock.Now()
	return tools.Result{Text: fmt.Sprintf("Scheduled job %s: %s. First run %s (in %s). Message: %s",
		j.ID, j.Schedule.Describe(), formatTime(j.NextRun, j.Schedule.location()),
		shortDuration(j.NextRun.Sub(now).Round(time.Minute)), preview(j.Message))}
}

func (t *CronTool) list(key string) tools.Result {
	jobs, err := t.cron.Jobs(key)
	if err != nil {
		return failed(err.Error())
	}
	if len(jobs) == 0 {
		return tools.Result{Text: "This chat has no scheduled jobs."}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d job(s) in this chat, soonest first:\n", len(jobs))
	for _, j := range jobs {
		fmt.Fprintf(&b, "- %s: %s; next %s", j.ID, j.Schedule.Describe(), formatTime(j.NextRun, j.Schedule.location()))
		if j.Runs > 0 {
			fmt.Fprintf(&b, "; ran %d time(s)", j.Runs)
		}
		fmt.Fprintf(&b, "; message: %s\n", preview(j.Message))
	}
	return tools.Result{Text: strings.TrimSuffix(b.String(), "\n")}
}

func failed(text string) tools.Result { return tools.Result{Text: "Error: " + text, IsError: true} }

// preview shortens a job's message for listings.
func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return fmt.Sprintf("%q", s)
}
