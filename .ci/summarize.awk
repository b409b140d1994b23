# Reads `cargo test` output and prints one line per test binary (its time
# and counts), the names of the tests that failed and the binaries that
# ended without a result, so the cause of a red run is in its last lines,
# not thousands of lines up. The last line is the plain "N passed, N failed".
# The integration tests are one binary a tier (tests/<tier>/main.rs), named
# here by the tier; a failed test is named by its module path in it
# (`cli  budget::ctl_status_…`), as `cargo test --test cli -- budget::…`
# runs it again.
/^ *Running / {
  if ($2 == "unittests") bin = "unit " $3
  else if ($2 ~ /^tests\/[^\/]+\/main\.rs$/) { bin = $2; sub(/^tests\//, "", bin); sub(/\/main\.rs$/, "", bin) }
  else bin = $2
  next
}
/^ *Doc-tests / { bin = "doc " $2; next }
/^test .* \.\.\. FAILED$/ { failed[++nfailed] = bin "  " $2; next }
/^error: test failed, to rerun pass / { crashed[++ncrashed] = $0; next }
/^ +`--(test|lib|bin|doc)/ { crashed[++ncrashed] = "target failed: " $1 " " $2; next }
/^test result: / {
  passed = 0; fails = 0; secs = "?"
  for (i = 2; i <= NF; i++) {
    if ($(i) ~ /^passed;?$/) passed = $(i - 1)
    if ($(i) ~ /^failed;?$/) fails = $(i - 1)
    if ($(i) == "in") secs = $(i + 1)
  }
  total_passed += passed; total_failed += fails
  rows[++nrows] = sprintf("ci: %-36s %9s %5d passed %3d failed", bin, secs, passed, fails)
  next
}
END {
  print ""
  print "ci: time by test binary"
  for (i = 1; i <= nrows; i++) print rows[i]
  if (ncrashed > 0) for (i = 1; i <= ncrashed; i++) print "ci: " crashed[i]
  if (nfailed > 0) {
    print "ci: failed tests (one again: cargo test --features external --test TIER -- NAME):"
    for (i = 1; i <= nfailed; i++) print "ci:   " failed[i]
  }
  printf "%d passed, %d failed\n", total_passed, total_failed + 0
}
