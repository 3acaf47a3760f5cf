#!/bin/sh
# The shared library exports exactly the functions of the public headers
# (the generated version script) and has a SONAME.
# Usage: abi_test.sh LIBCTRAINER_SO EXPORT_MAP MAJOR
set -eu
so=$1 map=$2 major=$3
tmp=$(mktemp -d /tmp/ct_abi_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libctrainer.so.$major" ] || { echo "FAIL: SONAME is '$soname'"; exit 1; }
nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
sed -n 's/^ *\([A-Za-z_][A-Za-z0-9_]*\);$/\1/p' "$map" | sort -u >"$tmp/declared"
n=$(wc -l <"$tmp/declared")
[ "$n" -gt 400 ] || { echo "FAIL: only $n functions in $map"; exit 1; }
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
[ -z "$extra" ] || { echo "FAIL: exported but not declared in a public header:"; echo "$extra"; exit 1; }
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
[ -z "$missing" ] || { echo "FAIL: declared but not exported:"; echo "$missing"; exit 1; }
for private in data_csv_parse data_read_file; do
  ! grep -qx "$private" "$tmp/exported" || { echo "FAIL: private $private exported"; exit 1; }
done
grep -qx trainer_train "$tmp/exported" || { echo "FAIL: trainer_train not exported"; exit 1; }
echo "abi: $soname exports the $n public functions only"
