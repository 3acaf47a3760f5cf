# Writes each complete program of a tutorial (a ```c block whose first line
# is "// tutorial: NAME ...") to dir/NAME.c, starting with a #line directive
# that points at the block in the .md file. Used by tutorials.cmake.
# usage: awk -v dir=OUTDIR -v doc=PATH.md -f tutorial_snippets.awk PATH.md
/^```c[ \t]*$/ { inblock = 1; first = 1; next }
inblock && /^```/ { inblock = 0; if (out != "") close(out); out = ""; next }
inblock && first {
    first = 0
    if ($0 ~ /^\/\/ tutorial: [A-Za-z0-9_]+/) {
        out = dir "/" $3 ".c"
        printf "#line %d \"%s\"\n", NR, doc > out
    }
}
inblock && out != "" { print > out }
