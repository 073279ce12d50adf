#!/usr/bin/env bash
# move-lab.sh puts the lab apart from the product (issue 31, part 4):
#
#   internal/fakes                 -> internal/testkit/fakes
#   internal/bus/bustest           -> internal/testkit/bustest
#   internal/channels/pairingtest  -> internal/testkit/pairingtest
#   internal/filelock/filelocktest -> internal/testkit/filelocktest
#   internal/golden                -> internal/testkit/golden
#   cmd/nanobot-bench              -> bench/cmd/nanobot-bench  (module .../nanobot/bench)
#   cmd/nanobot-floor              -> bench/cmd/nanobot-floor
#
# then rewrites the import paths in every .go file, the path mentions in the
# Markdown docs and arch_test.go, runs gofmt on what it changed, and tidies
# both go.mod files. It is idempotent: run it again after merging a branch
# that still adds or changes files at the old places, and it moves those
# files too (a file already at its new place with other content stops it:
# resolve that by hand); on a tree already moved it changes nothing.
#
# Merging this branch and one still on the old paths leaves conflicts in
# import blocks (the path changed beside an import the other branch added).
# Run this script in the conflicted merge: it rewrites the old paths, keeps
# both sides' imports in a conflict that lies wholly inside an import block,
# and stages each file it fully settled; it names the files whose other
# conflicts are left for a person. Then build: an import one side removed on
# purpose shows as "imported and not used".
#
#   scripts/move-lab.sh            # move, rewrite, gofmt, go mod tidy
#   MOVE_LAB_NO_TIDY=1 scripts/move-lab.sh   # skip go mod tidy (offline)
#
# internal/channels/clock stays: its System clock is the product's time
# source (channels, schedule, mcp); only its Fake is for tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1; then
  export PATH="/usr/local/go/bin:$PATH"
fi

moves=(
  "internal/fakes internal/testkit/fakes"
  "internal/bus/bustest internal/testkit/bustest"
  "internal/channels/pairingtest internal/testkit/pairingtest"
  "internal/filelock/filelocktest internal/testkit/filelocktest"
  "internal/golden internal/testkit/golden"
  "cmd/nanobot-bench bench/cmd/nanobot-bench"
  "cmd/nanobot-floor bench/cmd/nanobot-floor"
)

changed=0

# move_dir moves every file under $1 to the same place under $2, one file at
# a time, so a directory that already exists at the new place (an earlier
# run) is merged into rather than nested.
move_dir() {
  local from=$1 to=$2 f rel dest
  [ -d "$from" ] || return 0
  while IFS= read -r -d '' f; do
    rel=${f#"$from"/}
    dest=$to/$rel
    mkdir -p "$(dirname "$dest")"
    if [ -e "$dest" ]; then
      if cmp -s "$f" "$dest"; then
        git rm -q --cached "$f" 2>/dev/null || true
        rm -f "$f"
      else
        echo "move-lab: $f and $dest both exist and differ; merge them by hand" >&2
        exit 1
      fi
    elif git ls-files --error-unmatch "$f" >/dev/null 2>&1; then
      git mv "$f" "$dest"
    else
      mv "$f" "$dest"
    fi
    echo "moved $f -> $dest"
    changed=1
  done < <(find "$from" -type f -print0)
  find "$from" -depth -type d -empty -delete
}

for m in "${moves[@]}"; do
  # shellcheck disable=SC2086
  move_dir $m
done

# Path rewrites, each idempotent: the new text never matches the old pattern.
# Import paths and path mentions of the test helpers (Go and Markdown).
perl_go='
s{(?<!testkit/)internal/fakes(?=[/"`\s.,;:)]|$)}{internal/testkit/fakes}g;
s{internal/bus/bustest}{internal/testkit/bustest}g;
s{internal/channels/pairingtest}{internal/testkit/pairingtest}g;
s{internal/filelock/filelocktest}{internal/testkit/filelocktest}g;
s{(?<!testkit/)internal/golden(?=[/"`\s.,;:)]|$)}{internal/testkit/golden}g;
'
# In Markdown also the tools' directories, where named as paths (not the
# commands "go run ./cmd/nanobot-bench", which are run from bench/).
perl_md="$perl_go"'
s{(?<![./\w-])cmd/nanobot-(bench|floor)}{bench/cmd/nanobot-$1}g;
'

rewrite() {
  local prog=$1
  shift
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    if ! perl -0pe "$prog" "$f" | cmp -s - "$f"; then
      perl -0pi -e "$prog" "$f"
      echo "rewrote $f"
      changed=1
      case $f in *.go) grep -q '^<<<<<<< ' "$f" || gofmt -w "$f" ;; esac
    fi
  done
}

# resolve_imports settles, in a file left conflicted by a merge, the
# conflicts that lie wholly inside an import block: both sides' imports are
# kept (once each), which is what a merge of this move with a branch that
# added an import next to a moved one wants. A conflict anywhere else is
# left for a person. A file with no conflict left is gofmt'd and staged.
resolve_imports() {
  local f
  for f in "$@"; do
    grep -q '^<<<<<<< ' "$f" || continue
    python3 - "$f" <<'PY'
import re, sys
path = sys.argv[1]
lines = open(path).read().split("\n")
spec = re.compile(r'^\s*(?:[\w.]+\s+)?"[^"]+"\s*(?://.*)?$')
out, i, in_import = [], 0, False
while i < len(lines):
    line = lines[i]
    if line.startswith("import ("):
        in_import = True
    elif in_import and line.startswith(")"):
        in_import = False
    if in_import and line.startswith("<<<<<<< "):
        j, body, base = i + 1, [], False
        while j < len(lines) and not lines[j].startswith(">>>>>>> "):
            l = lines[j]
            if l.startswith("||||||| "):
                base = True
            elif l == "=======":
                base = False
            elif not base:
                body.append(l)
            j += 1
        if j < len(lines) and all(spec.match(l) or not l.strip() for l in body):
            seen = set()
            for l in body:
                if l.strip() and l.strip() not in seen:
                    seen.add(l.strip())
                    out.append(l)
            i = j + 1
            continue
    out.append(line)
    i += 1
# One import spec once per block: the move can leave a path both inside a
# settled conflict and beside it.
res, in_import, seen = [], False, set()
for line in out:
    if line.startswith("import ("):
        in_import, seen = True, set()
    elif in_import and line.startswith(")"):
        in_import = False
    if in_import and spec.match(line):
        if line.strip() in seen:
            continue
        seen.add(line.strip())
    res.append(line)
open(path, "w").write("\n".join(res))
PY
    if grep -q '^<<<<<<< ' "$f"; then
      echo "move-lab: $f still has conflicts outside its imports; resolve them by hand" >&2
    else
      gofmt -w "$f"
      git add "$f"
      echo "resolved the import conflicts of $f"
      changed=1
    fi
  done
}

mapfile -t gofiles < <(git ls-files -co --exclude-standard '*.go')
mapfile -t mdfiles < <(git ls-files -co --exclude-standard '*.md')
rewrite "$perl_go" "${gofiles[@]}"
rewrite "$perl_md" "${mdfiles[@]}"
mapfile -t unmerged < <(git diff --name-only --diff-filter=U -- '*.go')
resolve_imports "${unmerged[@]}"

# The bench module: its own go.mod, the product taken from the parent
# directory, so it can use the product's internal packages (Go's internal
# rule is by import path) without the product's go.mod listing the bench's
# needs.
if [ ! -f bench/go.mod ]; then
  goversion=$(sed -n 's/^go //p' go.mod)
  cat >bench/go.mod <<EOM
module github.com/nanobot-go/nanobot/bench

go $goversion

require github.com/nanobot-go/nanobot v0.0.0

replace github.com/nanobot-go/nanobot => ../
EOM
  echo "created bench/go.mod"
  changed=1
fi

if [ -z "${MOVE_LAB_NO_TIDY:-}" ]; then
  for dir in . bench; do
    before=$(cat "$dir/go.mod" "$dir/go.sum" 2>/dev/null | cksum)
    (cd "$dir" && go mod tidy)
    after=$(cat "$dir/go.mod" "$dir/go.sum" 2>/dev/null | cksum)
    if [ "$before" != "$after" ]; then
      echo "tidied $dir/go.mod"
      changed=1
    fi
  done
fi

if [ "$changed" = 0 ]; then
  echo "move-lab: nothing to do, the lab is already apart"
fi
