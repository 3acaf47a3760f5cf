"""Reads a TensorBoard event file with the tensorboard package's reader and
compares every scalar with expected.tsv (written by tb_run).

Usage: tb_read.py OUT_DIR  (OUT_DIR/logs holds the event file)
Values are compared after rounding the expectation to float32, the type
TensorBoard stores; "*" expects a finite value > 0 (a rate)."""
import glob
import math
import struct
import sys

from tensorboard.backend.event_processing import event_file_loader


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def scalar(v):
    """The value of a scalar summary value: the simple_value written, or the
    one-float tensor the loader migrates it to."""
    if v.WhichOneof("value") == "simple_value":
        return v.simple_value
    assert v.metadata.plugin_data.plugin_name == "scalars", v
    assert len(v.tensor.float_val) == 1, v
    return v.tensor.float_val[0]


def main(out):
    files = glob.glob(out + "/logs/events.out.tfevents.*")
    assert len(files) == 1, f"expected one event file, found {files}"
    got = {}
    events = 0
    first = None
    for ev in event_file_loader.EventFileLoader(files[0]).Load():
        events += 1
        if first is None:
            first = ev
            continue
        assert ev.wall_time > 1.6e9, f"wall_time {ev.wall_time}"
        for v in ev.summary.value:
            got.setdefault(v.tag, []).append((ev.step, scalar(v)))
    assert first is not None and first.file_version == "brain.Event:2", first
    want = {}
    for line in open(out + "/expected.tsv"):
        tag, step, value = line.rstrip("\n").split("\t")
        want.setdefault(tag, []).append((int(step), value))
    assert sorted(got) == sorted(want), f"tags {sorted(got)} != {sorted(want)}"
    n = 0
    for tag, rows in want.items():
        g = got[tag]
        assert len(g) == len(rows), f"{tag}: {len(g)} values, expected {len(rows)}"
        for (gs, gv), (ws, wv) in zip(g, rows):
            assert gs == ws, f"{tag}: step {gs}, expected {ws}"
            if wv == "*":
                assert math.isfinite(gv) and gv > 0, f"{tag}@{gs}: {gv}"
            else:
                assert gv == f32(float(wv)), f"{tag}@{gs}: {gv!r} != {f32(float(wv))!r}"
            n += 1
    total = sum(len(v) for v in got.values())
    assert events == total + 1, f"{events} events for {total} scalars"
    print(f"tensorboard reader: {n} scalars in {len(want)} tags match")


if __name__ == "__main__":
    main(sys.argv[1])
