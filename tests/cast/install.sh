#!/usr/bin/env bash
# Installs a pinned asciinema (the asciicast player and its `cat`) into
# target/asciinema/ from PyPI, for the test that plays `playdeck replay
# --cast` recordings in a player nobody here wrote
# (tests/external/cast.rs). Idempotent.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="$ROOT/target/asciinema"
VERSION=2.4.0
run() { PYTHONPATH="$DEST" python3 -m asciinema "$@"; }
if [ -d "$DEST/asciinema" ] && run --version 2>/dev/null | grep -q "$VERSION"; then
  echo "asciinema $VERSION: installed: $DEST"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "skipped: python3 (for pip) not found"
  exit 0
fi
rm -rf "$DEST"
PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check --no-deps --target "$DEST" "asciinema==$VERSION" 2>&1 | tail -3
if run --version 2>/dev/null | grep -q "$VERSION"; then
  echo "asciinema $VERSION: installed: $DEST"
else
  echo "asciinema $VERSION: not installed; the cast test will skip" >&2
  exit 1
fi
