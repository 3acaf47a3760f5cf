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

if [ "$fails" -ne 0 ]; then echo "$fails failed"; exit 1; fi
echo "all plot checks passed"
