#!/bin/sh
# ctrainer plot: MetricsLogger JSON lines and CSV files drawn as SVG that
# parses (python3's XML parser) with one polyline per series and one point
# per value, and as PNG that libpng decodes (png_pixels) to the SVG's size
# with each polyline vertex in its series' colour; bad inputs fail with a
# clear message and write nothing.
# usage: plot_test.sh CTRAINER PNG_PIXELS
set -u
ctrainer=$1 png_pixels=$2
. "$(dirname "$0")/checks.sh"

# svg_series FILE: "name:points" per polyline, from the parsed document
svg_series() {
    python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == ns + "svg", root.tag
for p in root.iter(ns + "polyline"):
    pts = p.get("points").split()
    for xy in pts:
        x, y = map(float, xy.split(","))
        assert 0 <= x <= float(root.get("width")) and 0 <= y <= float(root.get("height")), xy
    print(f"{p.find(ns + 'title').text}:{len(pts)}")
PY
}

cat >"$dir/run.jsonl" <<'EOF2'
{"epoch": 1, "train_loss_epoch": 0.9, "eval_loss_epoch": 1.0, "accuracy": 0.5}
{"epoch": 2, "train_loss_epoch": 0.6, "eval_loss_epoch": 0.8, "accuracy": 0.7}

{"epoch": 3, "train_loss_epoch": 0.4, "eval_loss_epoch": null, "accuracy": 0.8, "f1 <macro>": 0.75}
EOF2
"$ctrainer" plot "$dir/run.jsonl" -o "$dir/a.svg" >"$dir/out" 2>&1
check "plot jsonl exits 0" test $? -eq 0
check "plot says what it wrote" has "4 curves written to $dir/a.svg"
svg_series "$dir/a.svg" >"$dir/series" 2>&1
check "jsonl: one polyline per series" test "$(cat "$dir/series")" = "train_loss_epoch:3
eval_loss_epoch:2
accuracy:3
f1 <macro>:1"

# png_matches_svg PNG SVG: the PNG has the SVG's size, and the pixel under
# every polyline vertex has the polyline's colour ("ok N" with N vertices)
png_matches_svg() {
    python3 - "$png_pixels" "$1" "$2" <<'PY'
import subprocess, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[3]).getroot()
want = {}
for p in root.iter(ns + "polyline"):
    for xy in p.get("points").split():
        x, y = map(float, xy.split(","))
        want["%d,%d" % (int(x), int(y))] = p.get("stroke")
out = subprocess.run([sys.argv[1], sys.argv[2]] + list(want), capture_output=True,
                     text=True, check=True).stdout.split("\n")
assert out[0] == "%s %s" % (root.get("width"), root.get("height")), out[0]
for line in out[1:-1]:
    xy, color = line.split()
    assert color == want[xy], (xy, color, want[xy])
print("ok", len(want))
PY
}

"$ctrainer" plot "$dir/run.jsonl" -o "$dir/a.png" >"$dir/out" 2>&1
check "plot png exits 0" test $? -eq 0
check "plot png says what it wrote" has "4 curves written to $dir/a.png"
check "png: decodes to the SVG's size, vertices in their series' colours" \
    test "$(png_matches_svg "$dir/a.png" "$dir/a.svg" 2>&1)" = "ok 9"
"$ctrainer" plot "$dir/run.jsonl" -o "$dir/no/such/dir/a.png" >"$dir/out" 2>&1
check "png into a missing folder fails" test $? -eq 1
check "png failure names the path" has "$dir/no/such/dir/a.png"

printf 'epoch,train_loss_epoch,eval_loss_epoch,eval_acc\n1,0.5,0.6,\n2,0.25,0.3,0.9\n3,0.125,nan,0.95\n' \
    >"$dir/run.csv"
"$ctrainer" plot "$dir/run.csv" --output="$dir/b.svg" --title "run <b>" >"$dir/out" 2>&1
check "plot csv exits 0" test $? -eq 0
svg_series "$dir/b.svg" >"$dir/series" 2>&1
check "csv: one polyline per series" test "$(cat "$dir/series")" = "train_loss_epoch:3
eval_loss_epoch:2
eval_acc:2"
check "the title is escaped" grep -q "<title>run &lt;b&gt;</title>" "$dir/b.svg"

"$ctrainer" plot "$dir/missing.jsonl" -o "$dir/c.svg" >"$dir/out" 2>&1
check "missing input fails" test $? -eq 1
check "missing input is named" has "ctrainer: error: $dir/missing.jsonl: cannot open"
printf '{"epoch": 1, "loss": 0.5}\n[1, 2]\n' >"$dir/bad.jsonl"
"$ctrainer" plot "$dir/bad.jsonl" -o "$dir/c.svg" >"$dir/out" 2>&1
check "a bad line fails at its line" has "bad.jsonl:2: not a JSON object"
printf 'epoch,loss\n1,0.5\n2,x\n' >"$dir/bad.csv"
"$ctrainer" plot "$dir/bad.csv" -o "$dir/c.svg" >"$dir/out" 2>&1
check "a bad cell fails at its line" has "bad.csv:3: loss is not a number: 'x'"
printf 'epoch,loss\n1,\n' >"$dir/empty.csv"
"$ctrainer" plot "$dir/empty.csv" -o "$dir/c.svg" >"$dir/out" 2>&1
check "no values fails" has "empty.csv: no metric values to plot"
{ printf epoch; seq -f ',m%g' 300 | tr -d '\n'; echo; } >"$dir/wide.csv"
"$ctrainer" plot "$dir/wide.csv" -o "$dir/c.svg" >"$dir/out" 2>&1
check "a CSV too wide fails" has "wide.csv:1: more than 256 columns"
"$ctrainer" plot "$dir/run.txt" -o "$dir/c.svg" >"$dir/out" 2>&1
check "another extension fails" has "unknown format: expected a MetricsLogger .jsonl or .csv"
check "nothing written on failure" test ! -e "$dir/c.svg"

# Epochs are whole numbers from 0 to 2^53: others fail at their line (each
# run under a timeout, as an epoch axis without a usable scale can hang).
for e in nan inf 1e16 -1 2.5; do
    printf 'epoch,train_loss_epoch\n1,0.5\n%s,0.4\n' "$e" >"$dir/epoch.csv"
    timeout 10 "$ctrainer" plot "$dir/epoch.csv" -o "$dir/c.svg" >"$dir/out" 2>&1
    check "epoch $e fails" test $? -eq 1
    check "epoch $e is named at its line" \
        has "epoch.csv:3: bad epoch '$e': expected a whole number from 0 to 9007199254740992"
done
printf '{"epoch": 1e17, "train_loss_epoch": 0.5}\n' >"$dir/epoch.jsonl"
timeout 10 "$ctrainer" plot "$dir/epoch.jsonl" -o "$dir/c.svg" >"$dir/out" 2>&1
check "a JSON epoch of 1e17 fails" has "epoch.jsonl:1: bad epoch 1e+17: expected a whole"
printf 'epoch,loss\n1,0.5,0.1\n' >"$dir/fields.csv"
"$ctrainer" plot "$dir/fields.csv" -o "$dir/c.svg" >"$dir/out" 2>&1
check "a row of the wrong width fails" has "fields.csv:2: 3 fields (header: 2)"
check "nothing written on a bad epoch" test ! -e "$dir/c.svg"

# svg_sane FILE: the document parses; every coordinate is a finite number
# inside the image; each panel has at most 12 epoch ticks ("ok N" with N
# polylines)
svg_sane() {
    python3 - "$1" <<'PY'
import math, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
w, h = float(root.get("width")), float(root.get("height"))
for el in root.iter():
    for a in ("x", "x1", "x2", "cx", "y", "y1", "y2", "cy"):
        if el.get(a) is not None and not el.get(a).endswith("%"):
            v = float(el.get(a))
            assert math.isfinite(v) and 0 <= v <= (w if "x" in a else h), (a, v)
    for xy in (el.get("points") or "").split():
        x, y = map(float, xy.split(","))
        assert math.isfinite(x) and math.isfinite(y) and 0 <= x <= w and 0 <= y <= h, xy
ticks = [t for t in root.iter(ns + "text") if t.get("text-anchor") == "middle"]
panels = sum(t.text == "epoch" for t in ticks)
assert len(ticks) - panels <= 12 * panels, len(ticks)
print("ok", len(list(root.iter(ns + "polyline"))))
PY
}

# Extreme but valid numbers: epochs near 1e15 (one epoch twice: a range of
# width 0), the largest epoch, values near +-1e308 whose span overflows.
printf 'epoch,train_loss_epoch\n1000000000000000,0.5\n1000000000000000,0.4\n' \
    >"$dir/e15.csv"
printf 'epoch,train_loss_epoch,acc\n1,-1e308,0.5\n2,1e308,0.6\n' >"$dir/huge.csv"
printf 'epoch,train_loss_epoch,acc\n9007199254740992,1.7976931348623157e308,-1.7976931348623157e308\n' \
    >"$dir/max.csv"
printf 'epoch,acc\n0,5e-324\n1,1e-323\n' >"$dir/tiny.csv"
for f in e15 huge max tiny; do
    timeout 10 "$ctrainer" plot "$dir/$f.csv" -o "$dir/$f.svg" >"$dir/out" 2>&1
    check "$f: svg exits 0" test $? -eq 0
    check "$f: svg coordinates finite and inside" \
        test "$(svg_sane "$dir/$f.svg" 2>&1 | cut -d' ' -f1)" = ok
    timeout 10 "$ctrainer" plot "$dir/$f.csv" -o "$dir/$f.png" >"$dir/out" 2>&1
    check "$f: png exits 0" test $? -eq 0
    check "$f: png vertices in their series' colours" \
        test "$(png_matches_svg "$dir/$f.png" "$dir/$f.svg" 2>&1 | cut -d' ' -f1)" = ok
done

# svg_texts FILE: the document's title and each polyline's, as Python's
# ascii() writes them
svg_texts() {
    python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
print(ascii(root.find(ns + "title").text))
for p in root.iter(ns + "polyline"):
    print(ascii(p.find(ns + "title").text))
PY
}

# Names and titles in any encoding give a well-formed document: control
# characters as spaces, bytes outside valid UTF-8 (overlong, surrogate,
# above U+10FFFF, U+FFFE, cut short) as U+FFFD each.
printf 'epoch,a\300\200b\355\240\200c\364\220\200\200d\357\277\276e\342\202,\342\202\254\360\237\230\200\001\tz\n1,0.5,1\n2,0.4,2\n' \
    >"$dir/names.csv"
timeout 10 "$ctrainer" plot "$dir/names.csv" -o "$dir/n.svg" \
    --title "$(printf 'run\377\002<b>')" >"$dir/out" 2>&1
check "names: svg exits 0" test $? -eq 0
check "names: bad bytes as U+FFFD, controls as spaces" test "$(svg_texts "$dir/n.svg" 2>&1)" = \
    "'run\ufffd <b>'
'a\ufffd\ufffdb\ufffd\ufffd\ufffdc\ufffd\ufffd\ufffd\ufffdd\ufffd\ufffd\ufffde\ufffd\ufffd'
'\u20ac\U0001f600 \tz'"
printf '{"epoch": 1, "train\\u0001loss": 0.5}\n' >"$dir/ctl.jsonl"
timeout 10 "$ctrainer" plot "$dir/ctl.jsonl" -o "$dir/ctl.svg" >"$dir/out" 2>&1
check "a JSON name with a control character parses" \
    test "$(svg_texts "$dir/ctl.svg" 2>&1 | tail -n 1)" = "'train loss'"
for f in names ctl; do
    ext=csv
    [ "$f" = ctl ] && ext=jsonl
    timeout 10 "$ctrainer" plot "$dir/$f.$ext" -o "$dir/$f.png" >"$dir/out" 2>&1
    check "$f: png exits 0" test $? -eq 0
done

if [ "$fails" -ne 0 ]; then echo "$fails failed"; exit 1; fi
echo "all plot checks passed"
