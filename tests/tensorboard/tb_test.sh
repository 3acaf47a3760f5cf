#!/bin/sh
# The TensorBoard event file read back by the tensorboard package (PyPI),
# installed once into VENV_DIR. Exits 77 (a loud skip) when it cannot be
# installed. Usage: tb_test.sh TB_RUN TB_READ_PY VENV_DIR
set -eu
run=$1 reader=$2 venv=$3
if ! "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1 ||
    ! "$venv/bin/pip" install -q tensorboard >"$venv.log" 2>&1; then
    echo "SKIPPED: cannot install the tensorboard package into $venv (see $venv.log)"
    exit 77
  fi
fi
tmp=$(mktemp -d /tmp/ct_tb_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$run" "$tmp"
"$venv/bin/python" "$reader" "$tmp"
