#!/usr/bin/env bash
# The tree's layout: no source file over 600 lines outside tests/ (tests and generated fixtures
# may be longer), the .editorconfig rules (spaces, no trailing whitespace, a final newline) in
# every source, and the tools (cli/, train/, bench/, examples/ and the tooling library tools/) on
# the public API: none includes anything of src/ (the library's internals).
#   usage: bash tests/cli/test_layout.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" layout "${1:-}"
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || bail "no tree at $ROOT"
# the tracked sources (a checkout), or every source below the root (an unpacked tarball)
if git -C "$ROOT" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    git ls-files '*.c' '*.h' '*.py' '*.sh' '*.def' Makefile > "$WORK/files"
else
    find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.py' -o -name '*.sh' -o -name '*.def' -o -name Makefile \) \
        -not -path './build*' | sed 's|^\./||' > "$WORK/files"
fi
[ -s "$WORK/files" ] || bail "no source files found"

long=$(grep -v '^tests/' "$WORK/files" | while read -r f; do n=$(wc -l < "$f"); [ "$n" -gt 600 ] && echo "$f: $n lines"; done)
if [ -z "$long" ]; then ok "no source file over 600 lines outside tests/"; else not_ok "no source file over 600 lines outside tests/" "$long"; fi

tabs=$(grep -v 'Makefile$' "$WORK/files" | xargs grep -lP '\t' 2>/dev/null)
if [ -z "$tabs" ]; then ok "spaces, no tabs (but in the Makefile)"; else not_ok "spaces, no tabs" "$tabs"; fi
trailing=$(xargs grep -lP '[ \t]+$' < "$WORK/files" 2>/dev/null)
if [ -z "$trailing" ]; then ok "no trailing whitespace"; else not_ok "no trailing whitespace" "$trailing"; fi
final=$(while read -r f; do [ -s "$f" ] && [ -n "$(tail -c 1 "$f")" ] && echo "$f"; done < "$WORK/files")
if [ -z "$final" ]; then ok "every source ends in a newline"; else not_ok "every source ends in a newline" "$final"; fi

internal=$(grep -E '^(cli|train|bench|examples|tools)/' "$WORK/files" | xargs grep -lE '#include "(\.\./)*src/' 2>/dev/null)
if [ -z "$internal" ]; then ok "cli/, train/, bench/, examples/, tools/ include nothing of src/"
else not_ok "cli/, train/, bench/, examples/, tools/ include nothing of src/" "$internal"; fi
finish
