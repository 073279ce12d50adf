package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// BootstrapFiles are injected into the system prompt in this order
// (README.md#the-workspace).
var BootstrapFiles = workspace.BootstrapFiles

// MemoryFile is the long-term memory injected under "# Memory".
const MemoryFile = workspace.MemoryFile

// HistoryFile is the append-only log that is never injected.
const HistoryFile = workspace.HistoryFile

// promptRecheck bounds how long a cached prompt is trusted when no file
// changed: skill availability depends on PATH and the environment, which a
// stat cannot see.
const promptRecheck = 5 * time.Minute

// mtimeSettle is how old a file's modification time must be before its
// stat is trusted to show the next change. File systems keep mtimes at a
// granularity: the kernel's clock tick (1-10 ms) on ext4, xfs or tmpfs, a
// second on HFS+ and some network file systems, two on FAT. An edit within
// the same tick that keeps the size leaves the stat as it was, so a stat
// taken while its mtime may still be the current tick proves nothing; once
// the mtime is older than the coarsest tick, any later write gets a newer
// one. The extra second is for rounding and clock skew.
//
// An mtime with a fraction of a second cannot come from a file system that
// keeps whole seconds, so such a stamp settles after fineSettle, ten times
// the longest kernel tick. This matters under load: every write of
// MEMORY.md (a consolidation) would otherwise have the prompt rebuilt on
// every turn for three seconds.
const (
	mtimeSettle = 3 * time.Second
	fineSettle  = 100 * time.Millisecond
)

// PromptBuilder builds the system prompt (README.md#the-workspace). The result
// is byte-identical between turns unless a file it reads changed, which keeps
// provider prompt caches warm; it is cached and rebuilt only when a stat shows
// a change.
type PromptBuilder struct {
	// Workspace is the workspace's path as the prompt names it.
	Workspace string
	// Files reads the workspace (required): every file the prompt reads
	// goes through it, so a link out, a FIFO, a huge file or one that is
	// not UTF-8 is left out with a note and one log line, never followed,
	// waited on or read whole (docs/tools.md#the-daemon-and-the-workspace).
	Files *workspace.Files
	// MaxFileChars caps each bootstrap file [20000].
	MaxFileChars int
	// Skills finds the skills; Skills.Workspace is set from Files.
	Skills  skills.Loader
	Version string
	// Clock is the prompt's date and time [clock.System].
	Clock clock.Clock

	mu sync.Mutex
	// sig is the signature prompt was built from.
	sig    signature
	built  time.Time
	prompt string
	tokens int // history.EstimateText(prompt)

	// The skills/ listing, read again only when the directory's stat
	// changes or has not settled, so an unchanged prompt costs stats only.
	dirMu     sync.Mutex
	dirListed bool
	dirSig    stamp
	// dirSkills are the SKILL.md paths of the listed skill directories; the
	// slice is replaced, never modified, so callers may keep it.
	dirSkills []string
}

// stamp is what a stat says about a file the prompt depends on: equal
// stamps mean the file is unchanged once its mtime has settled.
type stamp struct {
	mtime int64 // Unix nanoseconds; 0 when missing
	size  int64
	ok    bool // the file exists
}

// stampOf stats the workspace file rel (no open: a FIFO cannot block it).
func (b *PromptBuilder) stampOf(rel string) stamp {
	fi, err := b.Files.Stamp(rel)
	if err != nil {
		// A refused path (a link out of the workspace) differs from a
		// missing one, so removing the link rebuilds the prompt.
		if !errors.Is(err, fs.ErrNotExist) {
			return stamp{size: -1}
		}
		return stamp{}
	}
	return stamp{mtime: fi.ModTime().UnixNano(), size: fi.Size(), ok: true}
}

// settled reports whether s's mtime is old enough at now that a later
// write would change it (see mtimeSettle). A missing file has settled: its
// creation shows.
func (s stamp) settled(now time.Time) bool {
	if !s.ok {
		return true
	}
	settle := mtimeSettle
	if s.mtime%int64(time.Second) != 0 {
		settle = fineSettle
	}
	return now.UnixNano()-s.mtime >= int64(settle)
}

// signature summarises every file the prompt depends on: the bootstrap
// files, the memory file, skills/ and each listed skill's SKILL.md, in that
// order. The skill stamps need no names: a skill added, removed or renamed
// changes the stamp of skills/.
type signature struct {
	stamps []stamp
	// settled: every stamp had settled when it was taken.
	settled bool
}

// BuildEstimated returns the system prompt and its token estimate
// (history.EstimateText), cached with the prompt so that a turn does not
// estimate the same prompt again (pass it as history.Options.SystemTokens).
func (b *PromptBuilder) BuildEstimated() (string, int, error) {
	now := time.Now
	if b.Clock != nil {
		now = b.Clock.Now
	}
	// The stamps live on the stack unless the prompt is rebuilt; most
	// workspaces have fewer than 16 files to stat.
	var buf [16]stamp
	sig := b.signature(time.Now(), buf[:0])
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sig.settled && slices.Equal(sig.stamps, b.sig.stamps) && b.prompt != "" && now().Sub(b.built) < promptRecheck {
		return b.prompt, b.tokens, nil
	}
	p, err := b.build()
	if err != nil {
		return "", 0, err
	}
	// An unsettled signature may hide a same-tick edit made after the files
	// were read, so the prompt is used once and built again next time.
	b.sig = signature{stamps: slices.Clone(sig.stamps), settled: sig.settled}
	b.prompt, b.tokens, b.built = p, history.EstimateText(p), now()
	return b.prompt, b.tokens, nil
}

// signature stats every file the prompt depends on, appending the stamps
// to buf. wall is the real clock, which file mtimes come from; it is read
// before the stats, so a stamp settled at wall has settled when taken.
func (b *PromptBuilder) signature(wall time.Time, buf []stamp) signature {
	sig := signature{stamps: buf, settled: true}
	add := func(s stamp) {
		sig.stamps = append(sig.stamps, s)
		sig.settled = sig.settled && s.settled(wall)
	}
	for _, f := range BootstrapFiles {
		add(b.stampOf(f))
	}
	add(b.stampOf(MemoryFile))
	files, dir := b.skillFiles(wall)
	add(dir)
	for _, f := range files {
		add(b.stampOf(f))
	}
	return sig
}

// skillFiles returns the SKILL.md paths of the skill directories under
// skills/ and the directory's stamp. The directory is listed again only
// when its stamp changed or has not settled: adding, removing or renaming a
// skill changes the directory's mtime, while editing a skill changes only
// its SKILL.md, which signature stats anyway.
func (b *PromptBuilder) skillFiles(wall time.Time) ([]string, stamp) {
	st := b.stampOf(workspace.SkillsDir)
	b.dirMu.Lock()
	defer b.dirMu.Unlock()
	if b.dirListed && st == b.dirSig && st.settled(wall) {
		return b.dirSkills, st
	}
	var files []string
	entries, _ := b.Files.ReadDir(workspace.SkillsDir) // unreadable or missing: no skills, as the loader sees it
	for _, e := range entries {
		if e.IsDir() {
			files = append(files, path.Join(workspace.SkillsDir, e.Name(), workspace.SkillFile))
		}
	}
	b.dirListed, b.dirSig, b.dirSkills = true, st, files
	return files, st
}

func (b *PromptBuilder) build() (string, error) {
	sections, err := b.sections()
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, s := range sections {
		sb.WriteString(s.Text)
	}
	return sb.String(), nil
}

// PromptSection is one part of the system prompt, as /context lists it:
// the prompt is its sections' texts, joined.
type PromptSection struct {
	// Name says what the part is: "identity", a bootstrap file's name,
	// MemoryFile, "active skills" or "skills summary".
	Name string
	// Note adds what a reader wants to know about it: the active skills'
	// names, how many skills the summary lists, that a file was cut.
	Note string
	// Text is the part as the prompt holds it, heading included.
	Text string
}

// Section names other than the bootstrap files'.
const (
	SectionIdentity     = "identity"
	SectionActiveSkills = "active skills"
	SectionSkills       = "skills summary"
)

// Sections returns the parts of the system prompt as it would be built now,
// in order; missing and empty files have none. The prompt BuildEstimated
// returns is their texts joined (while no file changes in between).
func (b *PromptBuilder) Sections() ([]PromptSection, error) {
	return b.sections()
}

// sections builds the prompt's parts; build joins them, so what /context
// lists is what the model is sent.
func (b *PromptBuilder) sections() ([]PromptSection, error) {
	var sb strings.Builder
	b.identity(&sb)
	out := []PromptSection{{Name: SectionIdentity, Text: sb.String()}}
	for _, name := range BootstrapFiles {
		text, cut, err := b.readCapped(name)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		out = append(out, PromptSection{Name: name, Note: cutNote(cut), Text: "\n\n## " + name + "\n\n" + strings.TrimSpace(text)})
	}
	memory, cut, err := b.readCapped(MemoryFile)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(memory) != "" {
		out = append(out, PromptSection{Name: MemoryFile, Note: cutNote(cut), Text: "\n\n# Memory\n\n" + strings.TrimSpace(memory)})
	}
	loader := b.Skills
	loader.Workspace = b.Files.FS(workspace.SkillsDir)
	list, _ := loader.Load() // a broken skill is skipped (and logged by Files); the rest still load
	if always := skills.AlwaysBodies(list); always != "" {
		var names []string
		for _, s := range list {
			if s.Always && s.Available() {
				names = append(names, s.Name)
			}
		}
		out = append(out, PromptSection{Name: SectionActiveSkills, Note: strings.Join(names, ", "),
			Text: "\n\n# Active Skills\n\n" + always})
	}
	if summary := skills.Summary(list); summary != "" {
		available := 0
		for _, s := range list {
			if s.Available() {
				available++
			}
		}
		out = append(out, PromptSection{Name: SectionSkills, Note: fmt.Sprintf("%d skills, %d available", len(list), available),
			Text: "\n\n# Skills\n\nSkills extend what you can do. To use one, first read its SKILL.md at the given location with read_file. " +
				"Skills with available=\"false\" need what <requires> lists; tell the user how to install it if they ask for that skill.\n\n" +
				summary})
	}
	return out, nil
}

func cutNote(cut bool) string {
	if cut {
		return "cut at agents.bootstrap_max_chars"
	}
	return ""
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
// visible note (cut reports it); a missing file reads as empty. A file the
// daemon refuses (a link out of the workspace, a FIFO, one over
// workspace.MaxPromptFileBytes, not UTF-8 text, a directory) is left out:
// the prompt says so in one line, the log once (Files.Skip), and the turn
// goes on.
func (b *PromptBuilder) readCapped(rel string) (text string, cut bool, err error) {
	text, _, err = b.Files.ReadText(rel, workspace.MaxPromptFileBytes)
	if err != nil {
		b.Files.Skip(rel, "system prompt", err)
		return fmt.Sprintf("[%s is left out: %s. Run `nanobot doctor` for details.]", rel, workspace.Problem(err)), false, nil
	}
	limit := b.MaxFileChars
	total := utf8.RuneCountInString(text)
	if total <= limit {
		return text, false, nil
	}
	n := 0
	for i := range text {
		if n == limit {
			text = text[:i]
			break
		}
		n++
	}
	return text + fmt.Sprintf("\n\n[… %s is %d characters long; only the first %d are shown. Read the file for the rest.]",
		rel, total, limit), true, nil
}
