#!/bin/sh
# cmake --install into a temporary prefix, then build and run an
# out-of-tree consumer with find_package(ctrainer) (shared and static) and
# with pkg-config. Usage: install_test.sh BUILD_DIR CONSUMER_DIR [SANITIZE]
set -eu
build=$1 src=$2 sanitize=${3:-}
tmp=$(mktemp -d /tmp/ct_install_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -n "$sanitize" ]; then # a sanitized library needs a sanitized program
  export CFLAGS="-fsanitize=$sanitize" LDFLAGS="-fsanitize=$sanitize"
fi
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in include/ctrainer/ctrainer.h include/ctrainer/tensor.h lib/libctrainer.a \
  lib/libctrainer.so lib/libctrainer.so.0 bin/ctrainer \
  lib/cmake/ctrainer/ctrainerConfig.cmake lib/cmake/ctrainer/ctrainerConfigVersion.cmake \
  lib/pkgconfig/ctrainer.pc; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
"$prefix/bin/ctrainer" --help >/dev/null

# find_package: both targets; the shared program finds the library by rpath
cmake -S "$src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/configure.log" ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
"$tmp/build/consumer_shared"
"$tmp/build/consumer_static"
ldd "$tmp/build/consumer_shared" | grep -q "$prefix/lib/libctrainer.so.0" ||
  { echo "FAIL: consumer_shared does not use the installed libctrainer.so.0"; exit 1; }

# pkg-config
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs ctrainer)
echo "pkg-config: $flags"
cc ${CFLAGS:-} -o "$tmp/consumer_pc" "$src/main.c" $flags ${LDFLAGS:-}
LD_LIBRARY_PATH="$prefix/lib" "$tmp/consumer_pc"
# static: the archive first, then the private dependencies (--as-needed
# drops -lctrainer, which the archive already satisfied)
cc ${CFLAGS:-} -o "$tmp/consumer_pc_static" "$src/main.c" $(pkg-config --cflags ctrainer) \
  "$prefix/lib/libctrainer.a" ${LDFLAGS:-} -Wl,--as-needed $(pkg-config --static --libs ctrainer)
! ldd "$tmp/consumer_pc_static" | grep -q libctrainer ||
  { echo "FAIL: the static consumer needs libctrainer.so"; exit 1; }
"$tmp/consumer_pc_static"
echo "install test passed"
