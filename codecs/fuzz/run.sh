#!/usr/bin/env bash
# Bounded fuzzing of zarrpipe's decode path: each target for SECONDS (default 120).
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz). Crashes land in
# artifacts/<target>/; turn each into a regression test in codecs/tests/hostile.rs.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-120}"
for target in decode_chunk metadata; do
  mkdir -p "corpus/$target"
  cargo +nightly fuzz run "$target" -O "corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 2>&1 | tail -n 3
done
