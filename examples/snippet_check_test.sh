#!/bin/sh
# Tests snippet_check.awk on the fixtures in tests/fixtures/snippets: the
# matching excerpts pass, and each kind of bad block fails naming DOC:LINE.
# usage: snippet_check_test.sh snippet_check.awk FIXTURE_DIR
check="$1"
dir="$2"
out="${TMPDIR:-/tmp}/snippet_check_test.$$"
mkdir -p "$out" || exit 1
trap 'rm -rf "$out"' EXIT
# the tutorial program NAME.c, as tutorials.cmake writes it
awk -v dir="$out" -v doc="$dir/good.md" -f "$(dirname "$check")/tutorial_snippets.awk" \
    "$dir/good.md" || exit 1
status=0

# expect RC DOC [MESSAGE...]: the exit status, and each message in the output
expect() {
    rc="$1"
    doc="$2"
    shift 2
    awk -v root="$dir" -v tutorials="$out" -f "$check" "$dir/$doc" >"$out/log" 2>&1
    got=$?
    if [ "$got" -ne "$rc" ]; then
        echo "FAIL $doc: exit status $got, expected $rc"
        status=1
    fi
    for msg in "$@"; do
        if ! grep -qF -- "$msg" "$out/log"; then
            echo "FAIL $doc: no \"$msg\" in the output below"
            status=1
        fi
    done
    # one line per failure (or the count), nothing else reported
    if [ "$(wc -l <"$out/log")" -ne $# ]; then
        echo "FAIL $doc: $(wc -l <"$out/log") lines, expected $#"
        status=1
    fi
    cat "$out/log"
}

expect 0 good.md "4 blocks checked"
expect 1 drifted.md "$dir/drifted.md:3: the excerpt's lines from line 7 are not in source.c"
expect 1 unmarked.md "$dir/unmarked.md:8: a \`\`\`c block must start with \"// tutorial: NAME\"" \
    "$dir/unmarked.md:12: this excerpt of source.c has no code"
expect 1 misordered.md \
    "$dir/misordered.md:3: the excerpt's lines from line 7 are not in source.c" \
    "$dir/misordered.md:10: the source of this excerpt, missing.c ($dir/missing.c), is missing or empty" \
    "$dir/misordered.md:15: a \`\`\`c block is not closed"
exit $status
