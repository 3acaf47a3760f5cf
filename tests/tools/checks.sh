# Shared by the tool test scripts (sourced): a temporary $dir removed at
# exit, named checks counted in $fails, and greps of $dir/out.
# usage: . "$(dirname "$0")/checks.sh"
dir=$(mktemp -d /tmp/ct_tool_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0

check() { # check NAME CONDITION...
    name=$1
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
has() { grep -q -- "$1" "$dir/out"; }
has_line() { grep -qx -- "$1" "$dir/out"; }
