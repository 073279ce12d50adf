package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/skills"
)

// BootstrapFiles are injected into the system prompt in this order (S-C1).
var BootstrapFiles = []string{"AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md"}

// MemoryFile is the long-term memory injected under "# Memory".
const MemoryFile = "memory/MEMORY.md"

// HistoryFile is the append-only log that is never injected.
const HistoryFile = "memory/HISTORY.md"

// promptRecheck bounds how long a cached prompt is trusted when no file
// changed: skill availability depends on PATH and the environment, which a
// stat cannot see.
const promptRecheck = 5 * time.Minute

// PromptBuilder builds the system prompt (S-C1). The result is byte-identical
// between turns unless a file it reads changed, which keeps provider prompt
// caches warm; it is cached and rebuilt only when a stat shows a change.
type PromptBuilder struct {
	Workspace string
	// MaxFileChars caps each bootstrap file [20000].
	MaxFileChars int
	// Skills finds the skills; Skills.Workspace is set from Workspace.
	Skills  skills.Loader
	Version string
	Now     func() time.Time

	mu     sync.Mutex
	sig    string
	built  time.Time
	prompt string
}

// Build returns the system prompt.
func (b *PromptBuilder) Build() (string, error) {
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	sig := b.signature()
	b.mu.Lock()
	defer b.mu.Unlock()
	if sig == b.sig && b.prompt != "" && now().Sub(b.built) < promptRecheck {
		return b.prompt, nil
	}
	p, err := b.build()
	if err != nil {
		return "", err
	}
	b.sig, b.prompt, b.built = sig, p, now()
	return p, nil
}

// signature summarises every file the prompt depends on by name, size and
// modification time.
func (b *PromptBuilder) signature() string {
	var sb strings.Builder
	stat := func(rel string) {
		fi, err := os.Stat(filepath.Join(b.Workspace, rel))
		if err != nil {
			sb.WriteString(rel + ":-;")
			return
		}
		fmt.Fprintf(&sb, "%s:%d:%d;", rel, fi.Size(), fi.ModTime().UnixNano())
	}
	for _, f := range BootstrapFiles {
		stat(f)
	}
	stat(MemoryFile)
	stat("skills")
	if entries, err := os.ReadDir(filepath.Join(b.Workspace, "skills")); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				stat(filepath.Join("skills", e.Name(), "SKILL.md"))
			}
		}
	}
	return sb.String()
}

func (b *PromptBuilder) build() (string, error) {
	var sb strings.Builder
	b.identity(&sb)
	for _, name := range BootstrapFiles {
		text, err := b.readCapped(name)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		sb.WriteString("\n\n## ")
		sb.WriteString(name)
		sb.WriteString("\n\n")
		sb.WriteString(strings.TrimSpace(text))
	}
	memory, err := b.readCapped(MemoryFile)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(memory) != "" {
		sb.WriteString("\n\n# Memory\n\n")
		sb.WriteString(strings.TrimSpace(memory))
	}
	loader := b.Skills
	loader.Workspace = b.Workspace
	list, _ := loader.Load() // a broken skill is skipped; the rest still load
	if always := skills.AlwaysBodies(list); always != "" {
		sb.WriteString("\n\n# Active Skills\n\n")
		sb.WriteString(always)
	}
	if summary := skills.Summary(list); summary != "" {
		sb.WriteString("\n\n# Skills\n\nSkills extend what you can do. To use one, first read its SKILL.md at the given location with read_file. ")
		sb.WriteString("Skills with available=\"false\" need what <requires> lists; tell the user how to install it if they ask for that skill.\n\n")
		sb.WriteString(summary)
	}
	return sb.String(), nil
}

func (b *PromptBuilder) identity(sb *strings.Builder) {
	fmt.Fprintf(sb, `# nanobot

You are nanobot, a personal AI assistant. You run as a long-lived daemon (version %s) on %s/%s and talk with your user through chat apps (Telegram, Discord) and the command line.

## Workspace

Your workspace is %s. File tools work relative to it.
- Long-term memory: %s holds lasting facts (preferences, people, projects). It is shown to you below. When you learn something that will matter later, update it with edit_file.
- History log: %s is an append-only log of past conversations, one paragraph per entry starting with [YYYY-MM-DD HH:MM]. It is not shown to you; search it (exec with grep, or read_file) when the user refers to the past.
- Skills: skills/<name>/SKILL.md, which override built-in skills of the same name; read_file also opens a built-in skill at its builtin: location.
- Files the user sends arrive in inbox/.

## Guidelines

- Answer in the user's language. Be concise: this is a chat, and replies are shown as Markdown.
- Use tools when they help, and say briefly what you did. Never invent a tool's result.
- Ask before doing anything destructive or irreversible.
- The message tool sends a message to the chat right away; use it for progress updates on long tasks or to reach another chat. Do not repeat its text in your final answer.
- Each user message starts with a bracketed line giving the current time, channel and chat; it is context from the system, not something the user typed.`,
		b.version(), runtime.GOOS, runtime.GOARCH, b.Workspace, MemoryFile, HistoryFile)
}

func (b *PromptBuilder) version() string {
	if b.Version == "" {
		return "dev"
	}
	return b.Version
}

// readCapped reads a workspace file, cutting it at MaxFileChars with a
// visible note; a missing file reads as empty.
func (b *PromptBuilder) readCapped(rel string) (string, error) {
	data, err := os.ReadFile(filepath.Join(b.Workspace, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", rel, err)
	}
	limit := b.MaxFileChars
	if limit <= 0 {
		limit = 20000
	}
	text := string(data)
	if utf8.RuneCountInString(text) <= limit {
		return text, nil
	}
	cut := 0
	for i := range text {
		if cut == limit {
			text = text[:i]
			break
		}
		cut++
	}
	return text + fmt.Sprintf("\n\n[… %s is %d characters long; only the first %d are shown. Read the file for the rest.]",
		rel, utf8.RuneCount(data), limit), nil
}
