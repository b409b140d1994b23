#!/usr/bin/env bash
# Issue 28's measure: an agent flooding each line type (the same warning,
# alternating states, growing usage totals) for SECS seconds (default 30),
# through the release binary. Prints one JSON line per case: the event log's
# and the checkpoint's size, the whole run directory (with the attempt's
# stdout log, capped at 32 MiB) and playdeck's peak RSS.
#   bash benches/flood.sh [SECS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
cargo build --release --quiet --bin playdeck
bin=$PWD/target/release/playdeck
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
one() {
  local name=$1 agent=$2 instr=$3
  cat > "$name.toml" <<T
[play]
name = "flood"
[palette]
roles = [{ role = "implementer" }]
[agents.flood]
$agent
stream_format = "jsonl"
max_runtime = $secs
[[operations]]
id = "flood"
role = "implementer"
agent = "flood"
instruction = '''$instr'''
T
  /usr/bin/time -f "%M" -o "rss-$name" "$bin" run --headless --run-dir "r-$name" "$name.toml" >/dev/null 2>&1 || true
  printf '{"case":"%s","secs":%s,"events_bytes":%s,"checkpoint_bytes":%s,"run_dir_bytes":%s,"peak_rss_kib":%s}\n' \
    "$name" "$secs" "$(stat -c %s "r-$name/events.jsonl")" "$(stat -c %s "r-$name/checkpoint.json")" \
    "$(du -sb "r-$name" | cut -f1)" "$(tail -1 "rss-$name")"
}
one warning 'binary = "yes"' '{"type":"warning","message":"disk slow"}'
one state 'binary = "yes"' '{"type":"state","state":"thinking"}
{"type":"state","state":"writing"}'
one usage "binary = \"awk\"
subcommand = '''BEGIN { for (i = 1; ; i++) printf \"{\\\"type\\\":\\\"usage\\\",\\\"output_tokens\\\":%d}\\n\", i }'''
prompt_via = \"stdin\"" 'x'
