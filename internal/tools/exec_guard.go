package tools

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/nanobot-go/nanobot/internal/workspace"
)

// The guards in this file are heuristics over the command's text. They stop
// a model that stumbles into a destructive command or an obvious path out of
// the workspace; they cannot stop one that hides its intent (a script, eval,
// base64, a glob). docs/tools.md says so, and what to do about it.

// denyRule refuses commands whose normalised text matches re.
type denyRule struct {
	re     *regexp.Regexp
	reason string
}

// devices are block-device names whose overwriting destroys a disk.
const devices = `(?:sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/|loop|sr)`

// cmdStart matches where a command word begins: the start, after a
// separator, or after sudo/exec/nohup/env prefixes.
const cmdStart = `(?:^|[;&|(\x60{]|\$\()\s*(?:(?:sudo|doas|exec|nohup|command|env)\s+(?:-\S+\s+)*)*`

// builtinDeny are the rules every command is checked against. They are
// compiled on the first command, not at start: a daemon whose model runs no
// command does not hold their programs (docs/BENCHMARKS.md#figures-behind-code-choices).
var builtinDeny = sync.OnceValue(func() []denyRule {
	return []denyRule{
		{regexp.MustCompile(`(?i)\bmkfs(?:\.[a-z0-9]+)?\b|` + cmdStart + `(?:wipefs|mkswap|fdisk|sfdisk|cfdisk|parted|diskpart)\b`),
			"formats or repartitions a disk"},
		{regexp.MustCompile(`(?i)\bdd\b[^;&|\n]*\bof=/dev/` + devices), "dd onto a disk device"},
		{regexp.MustCompile(`(?i)>\s*/dev/` + devices), "writes over a disk device"},
		{regexp.MustCompile(`(?i)\bshred\b[^;&|\n]*/dev/`), "shreds a device"},
		{regexp.MustCompile(`(?i)` + cmdStart + `(?:shutdown|reboot|poweroff|halt|init\s+[06])\b`), "shuts down or reboots the machine"},
		{regexp.MustCompile(`(?i)\bsystemctl\s+(?:-\S+\s+)*(?:poweroff|reboot|halt|kexec|suspend|hibernate)\b`), "shuts down or reboots the machine"},
		{regexp.MustCompile(`:\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:`), "is a fork bomb"},
		{regexp.MustCompile(`\w\s*\(\s*\)\s*\{[^}]*\|[^}]*&[^}]*\}\s*;`), "looks like a fork bomb"},
		{regexp.MustCompile(`(?i)\bkill\s+(?:-\S+\s+)*-1\b`), "kills every process of the user, nanobot included"},
		{regexp.MustCompile(`(?i)\b(?:pkill|killall)\s+(?:-\S+\s+)*nanobot\b`), "kills nanobot itself"},
		{regexp.MustCompile(`(?i)\bmv\s+[^;&|\n]*\s/dev/null\b`), "moves files to /dev/null, destroying them"},
		{regexp.MustCompile(`(?i)\bcrontab\s+(?:-\S+\s+)*-r\b`), "deletes the user's crontab"},
		{regexp.MustCompile(`(?i)\bfind\s+(?:/|~|\$\{?HOME\}?)\S*\s[^;&|\n]*-delete\b`), "deletes files across / or home"},
	}
})

// compileDeny compiles the operator's extra deny patterns (Go regular
// expressions, matched against the whole command), which checkDenied applies
// after the built-in ones.
func compileDeny(patterns []string) ([]denyRule, error) {
	var rules []denyRule
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("tools.exec.deny_patterns: %q: %w", p, err)
		}
		rules = append(rules, denyRule{re: re, reason: "matches the deny pattern " + p})
	}
	return rules, nil
}

// normalizeCommand undoes the cheapest disguises, so that `r\m -rf "/"` and
// `rm${IFS}-rf${IFS}/` read as rm -rf /: quotes and backslashes are dropped
// and $IFS becomes a space. The result is only matched, never run.
func normalizeCommand(cmd string) string {
	r := strings.NewReplacer(`${IFS}`, " ", `$IFS`, " ", `"`, "", `'`, "", `\`, "")
	return r.Replace(cmd)
}

// checkDenied returns why cmd is refused, or "" when neither a built-in rule
// nor one of extra matches. atRoot says the command runs in the workspace
// directory itself, where a recursive delete of "*" or "." would wipe the
// workspace (sessions included).
func checkDenied(cmd string, extra []denyRule, atRoot bool) string {
	norm := normalizeCommand(cmd)
	for _, rules := range [][]denyRule{builtinDeny(), extra} {
		for _, r := range rules {
			if r.re.MatchString(norm) || r.re.MatchString(cmd) {
				return r.reason
			}
		}
	}
	for _, simple := range simpleCommands(norm) {
		if reason := checkRecursive(simple, atRoot); reason != "" {
			return reason
		}
	}
	return ""
}

// simpleCommands splits a command line at ; & | newlines, parentheses and
// backquotes into word lists. Braces are kept: "${HOME}" is one word.
func simpleCommands(cmd string) [][]string {
	var out [][]string
	for _, part := range strings.FieldsFunc(cmd, func(r rune) bool {
		return strings.ContainsRune(";&|\n()`", r)
	}) {
		if words := strings.Fields(part); len(words) > 0 {
			out = append(out, words)
		}
	}
	return out
}

// checkRecursive refuses rm, chmod, chown and chgrp when they work
// recursively on /, a top-level directory, the home directory or the
// parent directory (and on the whole workspace, when atRoot).
func checkRecursive(words []string, atRoot bool) string {
	for i, w := range words {
		verb := filepath.Base(w)
		var action string
		switch verb {
		case "rm":
			action = "deletes"
		case "chmod", "chown", "chgrp":
			action = "changes permissions or owner of"
		default:
			continue
		}
		if i > 0 && words[i-1] == "git" {
			continue // git rm -r only untracks files under version control
		}
		recursive, target := false, ""
		for _, arg := range words[i+1:] {
			switch {
			case arg == "--recursive" || (strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--") && strings.ContainsAny(arg, "rR")):
				recursive = true
			case dangerousTarget(arg, atRoot):
				target = arg
			}
		}
		if target != "" && (recursive || (action != "deletes" && target == "/")) {
			return fmt.Sprintf("recursively %s %s", action, target)
		}
	}
	return ""
}

var topLevelDir = regexp.MustCompile(`^/[^/]+/?\*?$`)

func dangerousTarget(arg string, atRoot bool) bool {
	switch arg {
	case "/", "/*", "~", "~/", "~/*", "$HOME", "$HOME/", "$HOME/*", "${HOME}", "${HOME}/", "${HOME}/*", "..", "../", "../*":
		return true
	case "*", ".", "./", "./*", ".*":
		return atRoot
	}
	return topLevelDir.MatchString(arg)
}

// urlPattern finds URLs, whose paths are not file paths.
var urlPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://\S*`)

// allowedOutside are paths outside the workspace that commands may name
// even when restricted: devices every shell script uses, and the standard
// program directories (running /usr/bin/python3 reads no user data).
var allowedOutside = []string{
	"/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty",
	"/dev/random", "/dev/urandom", "/dev/fd/",
	"/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/",
}

func isAllowedOutside(p string) bool {
	for _, a := range allowedOutside {
		if p == a || p == strings.TrimSuffix(a, "/") || (strings.HasSuffix(a, "/") && strings.HasPrefix(p, a)) {
			return true
		}
	}
	return false
}

// checkPaths looks at every word of cmd that looks like a path and refuses
// the command if one leads into sessions/ or, when the workspace is
// restricted, out of the workspace. wd is the command's working directory
// relative to the workspace.
func checkPaths(cmd string, ws *workspace.Root, wd string) error {
	text := urlPattern.ReplaceAllString(normalizeCommand(cmd), " ")
	words := strings.FieldsFunc(text, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || strings.ContainsRune(";&|()<>`=,{}", r)
	})
	for _, w := range words {
		for _, home := range []string{"${HOME}", "$HOME"} {
			if rest, ok := strings.CutPrefix(w, home); ok && (rest == "" || rest[0] == '/') {
				w = "~" + rest
				break
			}
		}
		if !looksLikePath(w) {
			continue
		}
		p := w
		if !filepath.IsAbs(p) && !strings.HasPrefix(p, "~") {
			p = filepath.Join(wd, p)
		}
		_, err := ws.Resolve(p)
		switch {
		case errors.Is(err, workspace.ErrSessions):
			return fmt.Errorf("refused: %s is in sessions/, the chat logs, which commands may not touch", w)
		case errors.Is(err, workspace.ErrOutside) && !isAllowedOutside(p):
			return fmt.Errorf("refused: %s is outside the workspace, and tools.restrict_to_workspace is on; "+
				"work on files inside the workspace", w)
		}
	}
	return nil
}

func looksLikePath(w string) bool {
	return strings.Contains(w, "/") || strings.HasPrefix(w, "~") || w == ".." ||
		strings.EqualFold(strings.TrimRight(w, "/*"), workspace.SessionsDir)
}
