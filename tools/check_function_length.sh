#!/usr/bin/env bash
# The function-length check (docs/architecture.md, "Conventions"): no function in library code is longer
# than KVSIM_MAX_FUNCTION_LINES (default 120) lines, as lizard counts them (from the signature to the
# closing brace). Library code is every layer's folder; tests/, fuzz/ and the scripts under tools/ that
# are not C++ are outside it.
#
#   tools/check_function_length.sh        (ctest runs it as code.function_length)
#
# lizard (PyPI, pure Python) is installed on first use into ${KVSIM_CACHE:-$HOME/.cache/kvsim}/lizard-1.24.3.
# When the registry cannot be reached it says so and exits 77, which ctest reports as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX=${KVSIM_MAX_FUNCTION_LINES:-120}
VERSION=1.24.3
DIR=${KVSIM_CACHE:-$HOME/.cache/kvsim}/lizard-$VERSION
if ! PYTHONPATH=$DIR python3 -c 'import lizard' 2>/dev/null; then
  mkdir -p "$(dirname "$DIR")"
  tmp=$(mktemp -d "${DIR}.XXXXXX")
  if ! python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --target "$tmp" \
      "lizard==$VERSION" >"$tmp.log" 2>&1; then
    echo "function-length check skipped: pip could not install lizard $VERSION ($(tail -n 1 "$tmp.log"))"
    rm -rf "$tmp" "$tmp.log"
    exit 77
  fi
  rm -f "$tmp.log"
  rm -rf "$DIR" && mv "$tmp" "$DIR"  # whole or not at all
fi
LAYERS=(core sim model traces kernels validate policies replay sweep serve report tools python)
out=$(PYTHONPATH=$DIR python3 -m lizard --length "$MAX" --CCN 1000 --arguments 100 --warnings_only \
        -l cpp -x './tools/capture/*' "${LAYERS[@]}" || true)
if [[ -n $out ]]; then
  echo "$out"
  echo "function-length check: $(grep -c 'warning' <<<"$out") function(s) over $MAX lines in library code:" \
       "split them at their steps, each with a name (docs/architecture.md, Conventions)"
  exit 1
fi
echo "function-length check: every function in ${LAYERS[*]} is at most $MAX lines"
