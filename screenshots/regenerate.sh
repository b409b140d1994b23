#!/usr/bin/env bash
# Renders every screenshot listed in shots.txt with `playdeck screenshot`
# (the built-in demo play, a virtual moment of the run, deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
grep -v '^#' screenshots/shots.txt | while IFS='|' read -r name at size theme keys; do
  name=$(echo "$name" | xargs); at=$(echo "$at" | xargs); size=$(echo "$size" | xargs)
  theme=$(echo "$theme" | xargs); keys=$(echo "$keys" | xargs)
  [ -z "$name" ] && continue
  [ "$keys" = "-" ] && keys=""
  ./target/release/playdeck screenshot --at "$at" --size "$size" --theme "$theme" --keys "$keys" \
    --out "screenshots/$name.svg"
  echo "screenshots/$name.svg"
done
