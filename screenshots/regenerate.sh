#!/usr/bin/env bash
# Renders every screenshot listed in shots.txt with `playdeck screenshot`
# (the built-in demo play or the one named, a virtual moment of the run,
# deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
grep -v '^#' screenshots/shots.txt | while IFS='|' read -r name at size theme keys play runs; do
  name=$(echo "$name" | xargs); at=$(echo "$at" | xargs); size=$(echo "$size" | xargs)
  theme=$(echo "$theme" | xargs); keys=$(echo "$keys" | xargs); play=$(echo "${play:-}" | xargs)
  runs=$(echo "${runs:-}" | xargs)
  [ -z "$name" ] && continue
  [ "$keys" = "-" ] && keys=""
  [ "$play" = "-" ] && play=""
  extra=""
  [ -n "$runs" ] && extra="--runs-dir $runs"
  # shellcheck disable=SC2086 # no play: the demo
  ./target/release/playdeck screenshot $play $extra --at "$at" --size "$size" --theme "$theme" --keys "$keys" \
    --out "screenshots/$name.svg"
  echo "screenshots/$name.svg"
done

# The served page on a phone (web-*.png): a real headless Chromium through
# the browser test, which saves the pages it passes where this asks.
if command -v chromedriver >/dev/null 2>&1; then
  PLAYDECK_SCREENSHOTS_DIR=screenshots cargo test --quiet --features external --test external browser
  ls screenshots/web-*.png
else
  echo "no chromedriver: screenshots/web-*.png not made (Debian's chromium-driver)" >&2
fi
