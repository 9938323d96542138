#!/usr/bin/env bash
# A stripped kvsim (what a distribution package ships) runs the CUDA kernels through the emulator with its
# checker on. The checker names __shared__ arrays from the symbol table, so without one it cannot bound-
# check them; it must still tell them from host pointers (it did not: `kvsim validate --device emu` on a
# stripped binary stopped with an "internal error" at the first kernel with a __shared__ array), and say
# once that the arrays go unchecked. Usage: emu_stripped_binary.sh KVSIM. Skipped (77) without strip.
set -u
kvsim=${1:?usage: emu_stripped_binary.sh KVSIM}
command -v strip > /dev/null || { echo "strip not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
strip -o "$tmp/kvsim" "$kvsim" || { echo "FAIL: strip $kvsim"; exit 1; }
"$tmp/kvsim" validate --device emu --quick --policy quest > "$tmp/out.txt" 2>&1
rc=$?
tail -4 "$tmp/out.txt"
[ "$rc" = 0 ] || { echo "FAIL: the stripped kvsim exited $rc"; exit 1; }
grep -q "__shared__ arrays are not checked" "$tmp/out.txt" || { echo "FAIL: no notice that __shared__ arrays go unchecked"; exit 1; }
echo "ok: the stripped binary ran every quest kernel through the emulator"
