#!/usr/bin/env bash
# `make install PREFIX=...` into a scratch prefix: the shared library has its SONAME and the
# versioned file with its two links, posenc.pc works, and a program built with
# `pkg-config --cflags --libs posenc` (examples/decode.c, and examples/api.c: the README's ten
# lines) runs without LD_LIBRARY_PATH.
#   usage: bash tests/cli/test_install.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" install "${1:-}"
ROOT=$(cd "$HERE/../.." && pwd)
P="$WORK/prefix"
# the plain build (build/) with the Makefile's own flags, whatever build the calling make runs
# (the ASan pass passes BUILD, OPT and SAN down through MAKEFLAGS and the environment). Flags of
# its own (once OPT=-O2, without the full vectorizer) rebuilt build/ with them, and a benchmark
# run after make test measured that slower build.
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD -u OPT -u SAN make -C "$ROOT" --no-print-directory install \
    PREFIX="$P" > "$WORK/install.log" 2>&1
then ok "make install"
else bail "make install: $(tail -3 "$WORK/install.log")"; fi
readelf -d "$P/lib/libposenc.so" 2>/dev/null | grep -q "SONAME.*libposenc.so.0" && ok "SONAME libposenc.so.0" ||
    not_ok "SONAME" "$(readelf -d "$P/lib/libposenc.so" | grep SONAME)"
[ -L "$P/lib/libposenc.so" ] && [ -L "$P/lib/libposenc.so.0" ] && ok "libposenc.so -> .so.0 -> the versioned file" ||
    not_ok "the library's links" "$(ls -la "$P/lib")"
# the shared library exports the public API and nothing else: every defined dynamic symbol is a
# function that include/posenc.h (and the parts it includes) declares, and every one it declares is
# there (src/libposenc.map)
nm -D --defined-only "$P/lib/libposenc.so" | awk '{ print $3 }' | sort -u > "$WORK/exported"
cat "$ROOT"/include/posenc.h "$ROOT"/include/posenc/*.h | grep -oE '\bpe_[a-z][a-z0-9_]*\(' | tr -d '(' | sort -u > "$WORK/declared"
if [ -s "$WORK/exported" ] && cmp -s "$WORK/exported" "$WORK/declared"; then
    ok "nm -D: the $(wc -l < "$WORK/exported") exported symbols are posenc.h's functions"
else
    not_ok "nm -D: exported symbols = posenc.h's functions" "$(diff "$WORK/declared" "$WORK/exported" | head -20)"
fi
flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs posenc) && ok "pkg-config posenc" || not_ok "pkg-config posenc"
if cc -o "$WORK/decode" "$ROOT/examples/decode.c" $flags -lm > "$WORK/cc.log" 2>&1; then
    if env -u LD_LIBRARY_PATH "$WORK/decode" > "$WORK/run.log" 2>&1; then ok "a program linked with pkg-config runs without LD_LIBRARY_PATH"
    else not_ok "the installed program runs" "$(cat "$WORK/run.log")"; fi
    ldd "$WORK/decode" | grep -q "$P/lib/libposenc.so.0" && ok "it loads the installed library" || not_ok "ldd" "$(ldd "$WORK/decode")"
else
    not_ok "build against the installed library" "$(tail -5 "$WORK/cc.log")"
fi
# the README's ten lines as a whole program (examples/api.c), against the installed library
if cc -o "$WORK/api" "$ROOT/examples/api.c" $flags -lm > "$WORK/cc.log" 2>&1; then
    env -u LD_LIBRARY_PATH "$WORK/api" > "$WORK/run.log" 2>&1 && ok "examples/api.c (the README's API lines) runs installed" ||
        not_ok "examples/api.c runs" "$(cat "$WORK/run.log")"
else
    not_ok "examples/api.c builds against the installed library" "$(tail -5 "$WORK/cc.log")"
fi
finish
