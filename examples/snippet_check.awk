# Checks that every ```c block of the given Markdown files is compiled code.
# A block is either a complete program ("// tutorial: NAME ...", built by
# tutorials.cmake) or an excerpt, whose first line names its source:
#   // from: PATH            PATH relative to `root`, e.g. examples/x.c
#   // from: tutorial NAME   the program NAME.c in the folder `tutorials`
#                            (where tutorials.cmake writes them)
# An excerpt's lines must appear in its source in the same order, ignoring
# whitespace (line breaks and indentation may differ). A line "// ..." elides
# code: the parts between elisions may be apart in the source, in order.
# Each failure is printed as "DOC:LINE: why"; the exit status is 1 if any
# block fails.
# usage: awk -v root=DIR -v tutorials=DIR -f snippet_check.awk DOC.md...
function fail(why) {
    printf "%s:%d: %s\n", doc, start, why > "/dev/stderr"
    failed = 1
}
# The text of file `path` with all whitespace removed, read once.
function source(path,    line, text) {
    if (path in sources) return sources[path]
    text = ""
    while ((getline line < path) > 0) text = text line
    close(path)
    gsub(/[ \t\r]/, "", text)
    sources[path] = text
    return text
}
# Looks for each part of the excerpt in turn, each after the one before.
function check(    text, from, i, at, code) {
    for (i = 0; i <= nparts; i++) code = code part[i]
    if (code == "") {
        fail("this excerpt of " name " has no code")
        return
    }
    text = source(path)
    if (text == "") {
        fail("the source of this excerpt, " name " (" path "), is missing or empty")
        return
    }
    from = 1
    for (i = 0; i <= nparts; i++) {
        if (part[i] == "") continue
        at = index(substr(text, from), part[i])
        if (at == 0) {
            fail("the excerpt's lines from line " partline[i] " are not in " name)
            return
        }
        from += at - 1 + length(part[i])
    }
}
# Starts an excerpt of the file source_path, called source_name in messages.
function begin_excerpt(source_name, source_path) {
    mode = "from"; name = source_name; path = source_path; nparts = 0; part[0] = ""; partline[0] = FNR + 1
}
FNR == 1 && inblock { inblock = 0; fail("a ```c block is not closed") }
/^```c[ \t]*$/ { inblock = 1; first = 1; doc = FILENAME; start = FNR; mode = ""; blocks++; next }
inblock && /^```/ {
    inblock = 0
    if (mode == "from") check()
    next
}
inblock && first {
    first = 0
    if ($0 ~ /^\/\/ tutorial: [A-Za-z0-9_]+/) mode = "program"
    else if ($0 ~ /^\/\/ from: tutorial [A-Za-z0-9_]+[ \t]*$/)
        begin_excerpt("tutorial " $4, tutorials "/" $4 ".c")
    else if ($0 ~ /^\/\/ from: [^ \t]+[ \t]*$/) begin_excerpt($3, root "/" $3)
    else
        fail("a ```c block must start with \"// tutorial: NAME\" (a program), " \
             "\"// from: PATH\" or \"// from: tutorial NAME\" (an excerpt)")
    next
}
inblock && mode == "from" && /^[ \t]*\/\/ \.\.\.[ \t]*$/ {
    part[++nparts] = ""; partline[nparts] = FNR + 1
    next
}
inblock && mode == "from" {
    line = $0
    gsub(/[ \t\r]/, "", line)
    part[nparts] = part[nparts] line
}
END {
    if (inblock) fail("a ```c block is not closed")
    if (!failed) printf "%d blocks checked\n", blocks
    exit failed
}
