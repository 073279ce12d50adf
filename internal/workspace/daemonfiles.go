package workspace

// The workspace is hostile to the daemon too (docs/tools.md#the-daemon-and-the-workspace):
// every file in it can be written by a command the model runs, so every file
// the daemon itself reads, writes, moves or locks there is listed in
// DaemonFiles and reached only through Files, which treats each as hostile
// input. TestDaemonFileAccess (arch) keeps the rest of the code from opening
// a workspace path any other way; the escape suite tries a link, a FIFO and
// a huge file on every row of the table.

// Caps on what the daemon reads of a workspace file. Every read states one.
const (
	// MaxPromptFileBytes caps a file that goes into a prompt: a bootstrap
	// file, MEMORY.md, a SKILL.md, HEARTBEAT.md. It is far above what
	// agents.bootstrap_max_chars lets through (the text is then cut with a
	// note), so a real file is cut, never skipped; a file this large is a
	// mistake or an attack (a 64 GB sparse file) and is left out whole.
	MaxPromptFileBytes = 1 << 20
	// MaxSentFileBytes caps a file the message tool sends (read to upload
	// to a chat or served by the web page) when the channel states no
	// smaller cap of its own.
	MaxSentFileBytes = 50 << 20
)

// The daemon's files in the workspace, relative to it (docs/memory.md,
// docs/schedule.md, README.md#the-workspace).
const (
	MemoryFile    = "memory/MEMORY.md"
	HistoryFile   = "memory/HISTORY.md"
	HeartbeatFile = "HEARTBEAT.md"
	// SkillsDir holds the workspace's skills as <name>/SKILL.md.
	SkillsDir = "skills"
	// SkillFile is a skill's instructions in its directory.
	SkillFile = "SKILL.md"
	// InboxDir receives the files users send (internal/inbox).
	InboxDir = "inbox"
	// LegacyJobsFile is where older versions kept the cron jobs. The
	// scheduler reads it once to migrate it (internal/schedule, Migrate),
	// checks each entry as the cron tool checks a new job, and removes it.
	LegacyJobsFile = "cron/jobs.json"
	// MaxLegacyJobsBytes caps that read: 20 jobs of every chat fit many
	// times; a command's 64 GB file does not crash the start.
	MaxLegacyJobsBytes = 4 << 20
)

// BootstrapFiles go into the system prompt in this order
// (README.md#the-workspace).
var BootstrapFiles = []string{"AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md"}

// Access says what the daemon does with a workspace path.
type Access string

// The accesses of DaemonFiles.
const (
	// AccessPrompt: read into a prompt, as UTF-8 text under
	// MaxPromptFileBytes; a bad file is left out with a note.
	AccessPrompt Access = "read into a prompt"
	// AccessReplace: also replaced whole (write, fsync, rename) by a
	// consolidation or the web panel, under the file's lock.
	AccessReplace Access = "replaced by rename"
	// AccessAppend: appended to (O_APPEND) under the file's lock, never read
	// but for its last two bytes.
	AccessAppend Access = "appended to"
	// AccessList: a directory the daemon lists.
	AccessList Access = "listed"
	// AccessCreate: the daemon creates new files in it (O_EXCL, names of its
	// own) and reads them back under a stated cap.
	AccessCreate Access = "created and read back"
	// AccessSend: a file the model names to the message tool, read under the
	// channel's upload cap to send it, or served by the web page.
	AccessSend Access = "read to send"
	// AccessLock: a lock file (flock), opened and never read.
	AccessLock Access = "locked"
	// AccessMoveOut: an old directory moved out of the workspace at start.
	AccessMoveOut Access = "moved out at start"
	// AccessMigrate: an old version's state file, read once at start under
	// its cap, each entry checked as hostile input, then removed.
	AccessMigrate Access = "migrated once, then removed"
)

// DaemonFile is one path the daemon itself reaches in the workspace.
type DaemonFile struct {
	// Path is slash-separated and relative to the workspace; "*" stands for
	// one name the daemon or a user chose, "**" for any path the model
	// names. A directory ends in "/".
	Path   string
	Access []Access
	// Max caps what is read; 0 when the caller states the cap (AccessSend,
	// AccessCreate) or nothing is read.
	Max int64
	// Use says what the daemon does with it, for the docs and doctor.
	Use string
}

// Text reports whether the file must be UTF-8 text: it goes into a prompt.
func (d DaemonFile) Text() bool {
	for _, a := range d.Access {
		if a == AccessPrompt {
			return true
		}
	}
	return false
}

// Dir reports whether the row is a directory.
func (d DaemonFile) Dir() bool { return len(d.Path) > 0 && d.Path[len(d.Path)-1] == '/' }

// DaemonFiles is every path the daemon reaches in the workspace. A new file
// the daemon reads or writes there is a new row: the escape suite and
// doctor iterate the table.
var DaemonFiles = func() []DaemonFile {
	var rows []DaemonFile
	for _, name := range BootstrapFiles {
		rows = append(rows, DaemonFile{Path: name, Access: []Access{AccessPrompt, AccessReplace}, Max: MaxPromptFileBytes,
			Use: "bootstrap file, in every system prompt; the web panel edits it"})
	}
	return append(rows,
		DaemonFile{Path: MemoryFile, Access: []Access{AccessPrompt, AccessReplace}, Max: MaxPromptFileBytes,
			Use: "long-term memory, in every system prompt; a consolidation and the web panel replace it"},
		DaemonFile{Path: HistoryFile, Access: []Access{AccessAppend},
			Use: "the log of past conversations; a consolidation appends to it"},
		DaemonFile{Path: HeartbeatFile, Access: []Access{AccessPrompt, AccessReplace}, Max: MaxPromptFileBytes,
			Use: "the heartbeat's tasks, read at every check; the web panel edits it"},
		DaemonFile{Path: SkillsDir + "/", Access: []Access{AccessList}, Use: "the workspace's skills"},
		DaemonFile{Path: SkillsDir + "/*/" + SkillFile, Access: []Access{AccessPrompt}, Max: MaxPromptFileBytes,
			Use: "a skill: its summary, or its body when always-on, in every system prompt"},
		DaemonFile{Path: InboxDir + "/", Access: []Access{AccessCreate}, Use: "files users send"},
		DaemonFile{Path: InboxDir + "/*", Access: []Access{AccessCreate},
			Use: "a file a user sent; a picture is read back for the model (10 MiB cap)"},
		DaemonFile{Path: "**", Access: []Access{AccessSend},
			Use: "a file the message tool sends: uploaded to the chat (the channel's cap), served by the web page"},
		DaemonFile{Path: MemoryLock, Access: []Access{AccessLock}, Use: "the lock of MEMORY.md and HISTORY.md"},
		DaemonFile{Path: BootstrapLock, Access: []Access{AccessLock}, Use: "the lock of the bootstrap files and HEARTBEAT.md"},
		DaemonFile{Path: SessionsDir + "/", Access: []Access{AccessMoveOut},
			Use: "chat logs of old versions, moved to agents.sessions_dir at start; a link is never followed"},
		DaemonFile{Path: LegacyJobsFile, Access: []Access{AccessMigrate}, Max: MaxLegacyJobsBytes,
			Use: "cron jobs of old versions, migrated into the data dir once (each entry checked like the cron tool's input), then removed"},
	)
}()
