#!/usr/bin/env python3
"""Replace requirement ids of the old, unpublished specification with references a reader can open.

Code and docs used to cite ids like (S-A5) or "SPEC S-T4" from a specification that is not in the repository. This
script rewrites each id into a doc section (docs/x.md#anchor), README section or package that explains the same
thing, so a newcomer can follow it. It is idempotent: run it again after merging other branches and it rewrites
only what is new (a tree without ids is left untouched).

    python3 scripts/spec-refs.py          # rewrite the tree, list the files changed
    python3 scripts/spec-refs.py --check  # exit 1 if any id is left (changes nothing)

The forms it knows, most specific first:
  1. PHRASES: sentences that name an id as a noun ("the S-V3 invariants") are rephrased.
  2. A Markdown heading drops its ids (the section is the reference), and links to its old anchor are updated.
  3. "(S-X5: the page …)" becomes "(the page …; see REF)".
  4. "// S-H1: an empty allowlist …" at the start of a comment becomes "// See REF. An empty allowlist …".
  5. A parenthesis of ids and other items, "(SPEC S-T4, S-S4, issue 30)", keeps the other items and replaces each id
     (or range S-W1..S-W3) with its reference; duplicates merge, and references into one file with different anchors
     become the file. In Markdown a reference to the page itself is dropped, one elsewhere becomes a relative link.
  6. Anything left is replaced in place.
A Go comment line (or Markdown paragraph line) that grew past its width pushes words onto the next line of its
paragraph, so the wrapping stays as it was.

refs_test.go (beside arch_test.go) keeps it so: TestNoSpecIDs fails if an id reappears in a .go or .md file,
TestDocRefsInGoComments checks that every docs/*.md reference in Go comments names an existing file and heading, and
TestDocLinksResolve does the same for the links between the Markdown pages.
"""

import os
import re
import subprocess
import sys

# Where each requirement is explained now. Keys are every id the old specification had, so an id that appears later
# in another branch is still mapped. A target is a repository path, with a GitHub heading anchor where one section
# is meant. Each target is checked to exist when the script runs.
REFS = {
    # Flow and concurrency
    "S-F1": "docs/architecture.md#one-message-end-to-end",
    "S-F2": "docs/architecture.md#one-message-end-to-end",
    "S-F3": "docs/channels.md#outbound-manager",
    "S-F4": "docs/operations.md#shutdown",
    # Vocabulary: messages, deltas, levels of detail, projection
    "S-V1": "docs/sessions.md#records",
    "S-V2": "internal/llm/accumulator.go",
    "S-V3": "docs/history.md#projection",
    "S-V4": "docs/routing.md#what-the-caller-sees",
    "S-V5": "docs/history.md#levels-of-detail",
    "S-V6": "docs/history.md#projection",
    "S-V7": "docs/history.md#thinking",
    # Sessions
    "S-S1": "docs/sessions.md",
    "S-S2": "docs/sessions.md#writing",
    "S-S3": "docs/sessions.md#archives-new",
    "S-S4": "docs/tools.md#sandbox",
    # System prompt
    "S-C1": "README.md#the-workspace",
    "S-C2": "docs/skills.md#in-the-system-prompt",
    # Agent loop and chat commands
    "S-A1": "docs/architecture.md#one-message-end-to-end",
    "S-A2": "docs/routing.md#what-happens-when-a-call-fails",
    "S-A3": "docs/reliability.md#every-turn-ends-with-something-to-read",
    "S-A4": "docs/channels.md#chat-commands-internalcommands",
    "S-A5": "docs/reliability.md#every-turn-ends-with-something-to-read",
    # Memory and skills
    "S-M1": "docs/memory.md",
    "S-M2": "docs/memory.md",
    "S-M3": "docs/memory.md#when",
    "S-K1": "docs/skills.md#where-skills-come-from",
    # Tools
    "S-T1": "docs/tools.md#every-call-the-registry",
    "S-T2": "docs/tools.md#the-built-in-tools",
    "S-T3": "docs/tools.md#confinement",
    "S-T4": "docs/tools.md#sandbox",
    # Providers and routing
    "S-P1": "docs/providers-openai.md",
    "S-P2": "docs/routing.md#routes",
    "S-P3": "README.md#models-and-providers",
    # Channels
    "S-H1": "docs/channels.md#inbound-access-pairingstore-intake-lanes",
    "S-H2": "docs/telegram.md",
    "S-H3": "docs/discord.md",
    "S-H4": "README.md#commands",
    # Proactive work
    "S-R1": "docs/schedule.md#the-heartbeat",
    "S-R2": "docs/schedule.md#cron-jobs",
    # Config and CLI
    "S-G1": "docs/configuration.md",
    "S-G1a": "docs/configuration.md",
    "S-G2": "README.md#commands",
    # Operations
    "S-O1": "docs/operations.md#logs",
    "S-O2": "docs/operations.md#the-http-listener",
    "S-O3": "docs/operations.md#docker",
    # Performance
    "S-B1": "docs/BENCHMARKS.md",
    "S-B2": "docs/BENCHMARKS.md",
    # Web page
    "S-W1": "docs/web.md#chat",
    "S-W2": "docs/web.md#control-panel",
    "S-W3": "docs/web.md#access-closed-by-default",
    "S-W4": "docs/web.md#tests",
    # API
    "S-API1": "docs/api.md",
    "S-API2": "docs/api.md",
    "S-API3": "docs/api.md#files-and-limits",
    # Scale-out
    "S-X1": "docs/scale-out.md#roles",
    "S-X2": "docs/scale-out.md#per-chat-order-with-n-workers",
    "S-X3": "docs/scale-out.md#shared-state",
    "S-X4": "docs/scale-out.md#how-it-is-tested",
    "S-X5": "docs/scale-out.md#subjects-and-streams",
}

# A closer reference for an id in one file or folder (the longest matching path prefix wins). None drops the
# reference where it is cited in parentheses (the file is itself the explanation).
OVERRIDES = {
    ("internal/agent/subagent.go", "S-T2"): "docs/subagents.md",
    ("docs/subagents.md", "S-T2"): None,
    ("internal/schedule/", "S-T2"): "docs/schedule.md#the-tool",
    ("internal/tools/web/", "S-T2"): "docs/web-tools.md",
    ("internal/mcp/", "S-T2"): "docs/mcp.md",
    ("internal/metrics/", "S-O2"): "docs/operations.md#metrics",
    ("internal/memory/consolidate.go", "S-M2"): "docs/memory.md#the-model-call",
    ("internal/agent/memory.go", "S-M2"): "docs/memory.md#when",
    ("internal/session/bench_test.go", "S-S2"): "docs/sessions.md#cost-of-a-turn",
}

ID = r"S-[A-Z]+[0-9]+[a-z]?"
ID_RE = re.compile(r"\b" + ID + r"\b|\bSPEC(?:\.md| §)")  # what TestNoSpecIDs refuses
ONE = r"(?:SPEC\s+)?" + ID + r"(?:\.\." + ID + r")?"
IDLIST = ONE + r"(?:,\s*" + ONE + r")*"
SEP = r",\s*(?://\s*)?"  # a list may go on in the next line of a Go comment

# Sentences that use an id as a noun. {S-XX} is replaced by the reference, rendered for the file.
PHRASES = [
    # the sentence links history.md itself a line later
    (r"S-V5 now spends detail by budget:", "The history projection now spends detail by budget:"),
    (r"\(S-V5; the whole story", "(the whole story"),
    (r"\(S-F2's \"global cap on\n(\s*)concurrent LLM calls\"\)",
     "(the cap on concurrent model\n\\1calls of {S-F2})"),
    (r"a reference of the S-V2 contract", "a reference of the delta contract ({S-V2})"),
    (r"enforces the S-V3 invariants", "enforces the tool-call invariants ({S-V3})"),
    (r"the tool-call invariants of S-V3", "the tool-call invariants ({S-V3})"),
    (r"before S-V5's budget rule \(commit (\w+)\)", "before the budget rule ({S-V5}, commit \\1)"),
    (r"before S-V5's budget rule", "before the budget rule ({S-V5})"),
    (r"as S-V5 says:", "as {S-V5} says:"),
    (r"Before S-A3 this", "Before drafts on screen were kept ({S-A3}), this"),
    (r"written before S-A5 may", "written before empty answers were refused ({S-A5}) may"),
    (r"the two triggers of S-M2", "the two consolidation triggers ({S-M2})"),
    (r"the simple casts of S-T1", "the registry's simple casts ({S-T1})"),
    (r"the timing-free check of S-S2:", "the timing-free check that a turn's cost does not grow with the session ({S-S2}):"),
    (r"After the memory \(S-C1\):", "After the memory (the order of the whole prompt: {S-C1}):"),
    # The specification by name, without an id.
    (r"the layering of\n(\s*//\s*)SPEC §1:", "the layering\n\\1(docs/architecture.md#the-rooms):"),
    (r"Each is a feature SPEC\.md asks for or a library\n(\s*)the brief prefers\.",
     "Each is a feature the README documents or a library\n\\1the project prefers."),
    # "(SPEC\n// S-API1, S-API2): POST …" (the id list opens the next line).
    (r"\(SPEC\n(\s*//\s*)(" + IDLIST + r")\):\s*", "({\\2}):\n\\1"),
    # "(S-V5,\n// docs/history.md)": the id and the doc it now points into.
    (r"\((" + IDLIST + r"),\n\s*//\s*docs/[\w.-]+\.md\)", "({\\1})"),
]

OLD_ANCHOR = re.compile(r"(\.md#[\w-]*?)(?:-s-[a-z]+[0-9]+[a-z]?)+(?=[)\s.,;:]|$)", re.M)
SCAN_EXT = (".go", ".md", ".yaml", ".yml", ".js", ".html", ".css", ".sh", ".toml")
SELF = "scripts/spec-refs.py"


def root():
    return subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def headings(path):
    """Anchor -> heading text of a Markdown file (outside code fences)."""
    out, fence = {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            m = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m and not fence:
                # as the heading reads once its ids are dropped (step 2 of rewrite)
                text = ID_RE.sub("", re.sub(r"\s*\(" + IDLIST + r"\)", "", m.group(2))).rstrip()
                text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
                a = slug(text)
                n, base = 1, a
                while a in out:
                    a = "%s-%d" % (base, n)
                    n += 1
                out[a] = text
    return out


def expand(item):
    """The ids an item names: "SPEC S-A5" -> [S-A5]; "S-W1..S-W3" -> [S-W1, S-W2, S-W3]."""
    item = re.sub(r"^SPEC\s+", "", item.strip())
    m = re.fullmatch(r"(S-[A-Z]+)([0-9]+)\.\.(S-[A-Z]+)([0-9]+)", item)
    if m and m.group(1) == m.group(3):
        return ["%s%d" % (m.group(1), i) for i in range(int(m.group(2)), int(m.group(4)) + 1)]
    return [item]


class File:
    def __init__(self, rel):
        self.rel = rel
        self.md = rel.endswith(".md")
        self.dir = os.path.dirname(rel)

    def target(self, sid):
        """The reference for sid in this file; None when it is this file itself."""
        best, found = -1, False
        val = None
        for (prefix, k), v in OVERRIDES.items():
            if k == sid and self.rel.startswith(prefix) and len(prefix) > best:
                best, val, found = len(prefix), v, True
        if not found:
            if sid not in REFS:
                sys.exit("%s: %s is not in the table; add it to REFS" % (self.rel, sid))
            val = REFS[sid]
        if val is None:
            return None
        path = val.split("#")[0]
        if path == self.rel:
            return None
        if not self.md and not path.endswith(".md") and os.path.dirname(self.rel) == os.path.dirname(path):
            return None  # a Go file citing its own package
        return val

    def merged(self, sids):
        """The references for ids, duplicates merged; anchors into one file collapse to the file."""
        targets = []
        for s in sids:
            t = self.target(s)
            if t is not None and t not in targets:
                targets.append(t)
        byfile = {}
        for t in targets:
            byfile.setdefault(t.split("#")[0], []).append(t)
        out = []
        for t in targets:
            f = t.split("#")[0]
            t = t if len(byfile[f]) == 1 else f
            if t not in out:
                out.append(t)
        return out

    def link(self, t):
        """t as this file shows it: a relative link in Markdown, the path elsewhere."""
        if not self.md:
            return t
        path, _, anchor = t.partition("#")
        rel = os.path.relpath(path, self.dir or ".")
        name = os.path.basename(path) if path.startswith("docs/") and self.dir == "docs" else path
        if path.startswith("internal/") or path.startswith("cmd/"):
            name = "`%s`" % path
        return "[%s](%s%s)" % (name, rel, "#" + anchor if anchor else "")

    def inline(self, sids):
        """References for ids used inside a sentence: never empty."""
        out = [self.link(t) for t in self.merged(sids)]
        if out:
            return ", ".join(out)
        t = REFS.get(sids[0], "")
        path, _, anchor = t.partition("#")
        if self.md and path == self.rel and anchor:
            return "[%s](#%s)" % (headings(os.path.join(ROOT, path)).get(anchor, anchor), anchor)
        if self.md:
            return "this page"
        return "this package"


def rewrite(f, text):
    # 1. Phrases.
    for pat, rep in PHRASES:
        def sub(m, rep=rep):
            s = m.expand(rep)
            return re.sub(r"\{(" + IDLIST + r")\}",
                          lambda k: f.inline([i for item in k.group(1).split(",") for i in expand(item)]), s)
        text = re.sub(pat, sub, text)

    # 2. Markdown headings drop their ids.
    renamed = {}
    if f.md:
        def head(m):
            new = re.sub(r"\s*\(" + IDLIST + r"\)", "", m.group(2))
            new = ID_RE.sub("", new).rstrip()
            if new != m.group(2):
                renamed[slug(m.group(2))] = slug(new)
            return m.group(1) + new
        text = re.sub(r"(?m)^(#{1,6}\s+)(.*" + ID + r".*)$", head, text)

    # 3. "(IDS: rest)".
    def colon(m):
        refs = f.inline([i for item in m.group(1).split(",") for i in expand(item)])
        rest = m.group(2)
        if refs in ("this page", "this package"):
            return "(%s)" % rest
        return "(%s; see %s)" % (rest, refs)
    text = re.sub(r"\((" + IDLIST + r"):\s+([^()]*?)\)", colon, text, flags=re.S)

    # 4. "// IDS: sentence" at the start of a comment.
    def lead(m):
        refs = f.inline([i for item in m.group(2).split(",") for i in expand(item)])
        return "%sSee %s. %s" % (m.group(1), refs, m.group(3).upper())
    text = re.sub(r"(?m)^(\s*//\s+)(" + IDLIST + r"):\s+(\w)", lead, text)

    # 5. Parentheses holding ids among other items.
    def paren(m):
        out = []
        for part in re.split(SEP, m.group(1)):
            if re.fullmatch(ONE, part.strip()):
                out += [("ref", t) for t in f.merged(expand(part))]
            else:
                out.append(("text", part))
        files = {}
        for kind, v in out:
            if kind == "ref":
                files.setdefault(v.split("#")[0], set()).add(v)
        kept, seen = [], set()
        for kind, v in out:
            if kind == "ref":
                p = v.split("#")[0]
                v = v if len(files[p]) == 1 else p
                if v in seen:
                    continue
                seen.add(v)
                v = f.link(v)
            kept.append(v)
        if not kept:
            return ""
        return (" " if m.group(0).startswith(" ") else "") + "(%s)" % ", ".join(kept)
    item = r"(?:" + ONE + r"|[^(),\n]+)"
    group = r" ?\(((?:" + item + SEP + r")*" + ONE + r"(?:" + SEP + item + r")*)\)"
    text = re.sub(group, paren, text)

    # 6. Whatever is left, in place.
    text = re.sub(r"(?:SPEC\s+)?(" + ID + r"(?:\.\." + ID + r")?)",
                  lambda m: f.inline(expand(m.group(1))), text)
    return text, renamed


def width(line):
    return len(line.expandtabs(4))


def reflow(f, old, new):
    """Push words that no longer fit onto the next line of their paragraph (Go comments, Markdown prose)."""
    before = set(old.split("\n"))
    lines = new.split("\n")
    if f.md:
        limit = 120
        pat = re.compile(r"^(\s*(?:[-*] |\d+\. )?)(\S.*)$")
    else:
        limit = 79
        pat = re.compile(r"^(\s*// )(\S.*)$")
    i, fence = 0, False
    while i < len(lines):
        line = lines[i]
        if f.md and line.lstrip().startswith("```"):
            fence = not fence
        m = pat.match(line)
        ok = m and not fence and line not in before and width(line) > limit
        if f.md and ok:
            ok = not line.lstrip().startswith(("|", "#", ">"))
        if not ok:
            i += 1
            continue
        prefix = m.group(1)
        cont = prefix if not f.md else " " * len(prefix)
        words = m.group(2).split(" ")
        keep = []
        for w in words:
            if keep and width(prefix + " ".join(keep + [w])) > limit:
                break
            keep.append(w)
        spill = words[len(keep):]
        if not spill:
            i += 1
            continue
        lines[i] = prefix + " ".join(keep)
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        nm = pat.match(nxt) if nxt is not None else None
        same = nm and (nm.group(1) == cont if not f.md else
                       (len(nxt) - len(nxt.lstrip()) == len(cont)
                        and not nxt.lstrip().startswith(("-", "*", "|", "#", "```", ">"))
                        and not re.match(r"\s*\d+\. ", nxt)))
        if same:
            body = nxt[len(cont):] if f.md else nm.group(2)
            lines[i + 1] = cont + " ".join(spill) + " " + body
            before.discard(lines[i + 1])
        else:
            lines.insert(i + 1, cont + " ".join(spill))
        i += 1
    return "\n".join(lines)


def files():
    out = subprocess.check_output(["git", "ls-files", "-co", "--exclude-standard"], text=True, cwd=ROOT).split("\n")
    return [p for p in out if p and p != SELF and (p.endswith(SCAN_EXT) or os.path.basename(p) == "Dockerfile")
            and os.path.isfile(os.path.join(ROOT, p))]


def check_targets():
    bad = []
    for t in set(REFS.values()) | {v for v in OVERRIDES.values() if v}:
        path, _, anchor = t.partition("#")
        full = os.path.join(ROOT, path)
        if not os.path.exists(full):
            bad.append("%s: no such file" % t)
        elif anchor and anchor not in headings(full):
            bad.append("%s: no such heading" % t)
    return bad


def main():
    check = "--check" in sys.argv[1:]
    bad = check_targets()
    if bad:
        sys.exit("targets that do not exist:\n  " + "\n  ".join(sorted(bad)))
    left, changed, renamed = [], [], {}
    texts = {}
    for rel in files():
        with open(os.path.join(ROOT, rel), encoding="utf-8", errors="surrogateescape") as fh:
            texts[rel] = fh.read()
    for rel, text in texts.items():
        if not ID_RE.search(text):
            continue
        if check:
            left.append(rel)
            continue
        f = File(rel)
        new, ren = rewrite(f, text)
        new = reflow(f, text, new)
        renamed.update({(rel, a): b for a, b in ren.items()})
        if new != text:
            texts[rel] = new
            changed.append(rel)
    # Links to a heading whose ids were dropped follow it: those renamed in this run, and those a merged branch
    # still writes with the old anchor (the ids slugged at its end: "#every-turn-…-s-a3-s-a5").
    for rel, text in texts.items():
        if rel.endswith((".md", ".go")):
            new = OLD_ANCHOR.sub(r"\1", text)
            if new != text:
                texts[rel] = new
                if rel not in changed:
                    changed.append(rel)
    for (doc, old), newa in renamed.items():
        for rel, text in texts.items():
            if not rel.endswith(".md") and not rel.endswith(".go"):
                continue
            here = os.path.relpath(doc, os.path.dirname(rel) or ".")
            pats = ["(%s#%s)" % (here, old), "%s#%s" % (doc, old)] + (["(#%s)" % old] if rel == doc else [])
            new = text
            for p in pats:
                new = new.replace(p, p.replace("#" + old, "#" + newa))
            if new != text:
                texts[rel] = new
                if rel not in changed:
                    changed.append(rel)
    if check:
        if left:
            print("requirement ids left in:\n  " + "\n  ".join(left))
            return 1
        return 0
    for rel in changed:
        with open(os.path.join(ROOT, rel), "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(texts[rel])
    for rel in sorted(changed):
        print(rel)
    rest = [rel for rel, t in texts.items() if ID_RE.search(t)]
    if rest:
        print("ids left (extend PHRASES or REFS):", ", ".join(rest), file=sys.stderr)
        return 1
    return 0


ROOT = root()
if __name__ == "__main__":
    sys.exit(main())
