#!/usr/bin/env bash
# Installs the real agent CLIs at pinned versions into target/realcli/<dir>/
# (under the repository root). Idempotent: an installed version is skipped.
# Usage: tests/realcli/install.sh [--current-only] [cli...]   (cli: claude codex opencode gemini copilot)
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="$ROOT/target/realcli"

if ! command -v npm >/dev/null 2>&1; then
  echo "skipped: npm not found"
  exit 0
fi

# cli  package  version  bin  (first of each cli = current, second = oldest supported)
PINS="
claude   @anthropic-ai/claude-code 2.1.332 claude
claude   @anthropic-ai/claude-code 2.0.28  claude
codex    @openai/codex             0.171.0 codex
codex    @openai/codex             0.47.0  codex
opencode opencode-ai               1.18.33 opencode
opencode opencode-ai               1.0.0   opencode
gemini   @google/gemini-cli        0.61.0  gemini
gemini   @google/gemini-cli        0.11.3  gemini
copilot  @github/copilot           1.0.102 copilot
"
# Extra packages installed next to a CLI (opencode loads its provider SDK
# from its cache dir at runtime; see README.md).
CURRENT_ONLY=0
WANT=()
for a in "$@"; do
  case "$a" in
    --current-only) CURRENT_ONLY=1 ;;
    *) WANT+=("$a") ;;
  esac
done

mkdir -p "$DEST"
status=0
declare -A seen
while read -r cli pkg ver bin; do
  [ -z "${cli:-}" ] && continue
  if [ ${#WANT[@]} -gt 0 ] && [[ ! " ${WANT[*]} " =~ " $cli " ]]; then continue; fi
  if [ "$CURRENT_ONLY" = 1 ] && [ -n "${seen[$cli]:-}" ]; then continue; fi
  seen[$cli]=1
  dir="$DEST/$cli-$ver"
  exe="$dir/node_modules/.bin/$bin"
  if [ -x "$exe" ] && [ -f "$dir/.installed" ]; then
    echo "$cli $ver: already installed: $exe"
    continue
  fi
  echo "$cli $ver: installing $pkg@$ver into $dir"
  mkdir -p "$dir"
  if npm install --prefix "$dir" "$pkg@$ver" --no-audit --no-fund --loglevel=error >"$dir/install.log" 2>&1; then
    if [ -x "$exe" ]; then
      touch "$dir/.installed"
      echo "$cli $ver: installed: $exe"
    else
      echo "$cli $ver: FAILED: no $exe after install (see $dir/install.log)"
      status=1
    fi
  else
    echo "$cli $ver: FAILED: npm install (see $dir/install.log)"
    tail -5 "$dir/install.log" | sed 's/^/    /'
    status=1
  fi
done <<<"$PINS"

# opencode 1.0.x does not bundle @ai-sdk/openai-compatible: it runs
# `bun add @ai-sdk/openai-compatible@latest` into ~/.cache/opencode on first
# use, which fails offline. Pre-install it (the 1.x line, for AI SDK 5) in a
# seed directory that capture.py copies to $HOME/.cache/opencode; its
# package.json must say "latest", which is what opencode checks, and a
# `version` file must hold opencode's cache version.
for dir in "$DEST"/opencode-1.0.*; do
  [ -d "$dir" ] || continue
  seed="$dir/opencode-cache"
  if [ -f "$seed/node_modules/@ai-sdk/openai-compatible/package.json" ]; then
    echo "opencode $(basename "$dir"): provider seed already installed: $seed"
    continue
  fi
  mkdir -p "$seed"
  echo '{"dependencies":{}}' >"$seed/package.json"
  if npm install --prefix "$seed" @ai-sdk/openai-compatible@1.0.55 --no-audit --no-fund --loglevel=error >"$seed/install.log" 2>&1; then
    python3 - "$seed/package.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["dependencies"]["@ai-sdk/openai-compatible"] = "latest"
json.dump(d, open(p, "w"), indent=2)
PY
    # opencode 1.0 wipes its cache dir unless this file holds its cache
    # version (9 in 1.0.0).
    printf 9 >"$seed/version"
    echo "opencode $(basename "$dir"): provider seed installed: $seed"
  else
    echo "opencode $(basename "$dir"): FAILED: provider seed (see $seed/install.log)"
    status=1
  fi
done
exit $status
