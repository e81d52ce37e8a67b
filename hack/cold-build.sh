#!/usr/bin/env bash
# hack/cold-build.sh [TARGET…]: how long `make TARGET` (default: demo) takes on a fresh machine —
# a clone of HEAD with empty Go build and module caches — and where the time goes. Issue 36's
# cold-build figures come from it. Every output line is prefixed with the seconds since the start;
# at the end it prints the wall and CPU time (/usr/bin/time) and how busy the cores were (vmstat
# every 10 s: the samples with more than 10 % idle are listed, they are the waits that are not
# compiling). Run it on an otherwise idle machine: anything beside it is counted in.
#
# LOCKSTEP_COLD_DIR (default /tmp/lockstep-cold) holds the clone and the caches; it is deleted first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${LOCKSTEP_COLD_DIR:-/tmp/lockstep-cold}
targets=("${@:-demo}")
for tool in vmstat /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "cold-build: needs $tool (Debian: procps, time)" >&2; exit 1; }
done

# Go writes the module cache read-only: make it writable first, or only root could delete it.
[[ -d $dir ]] && chmod -R u+w "$dir"
rm -rf "$dir" && mkdir -p "$dir"
git clone -q "$root" "$dir/src"
export GOMODCACHE=$dir/mod GOCACHE=$dir/cache
unset GOFLAGS CGO_ENABLED GCFLAGS LOCKSTEP_GCFLAGS # the Makefile sets the build's own

vmstat -n 10 > "$dir/vmstat" &
vm=$!
trap 'kill $vm 2>/dev/null || true' EXIT
echo "cold-build: make ${targets[*]} in a clone of $(git -C "$root" rev-parse --short HEAD), empty caches, $(nproc) cores, $(date -u +%FT%TZ)"
start=${EPOCHREALTIME//[!0-9]/} # microseconds (the decimal point is the locale's)
status=0
(cd "$dir/src" && /usr/bin/time -f '%e %U %S' -o "$dir/time" make "${targets[@]}" 2>&1) |
  while IFS= read -r line || [[ -n $line ]]; do
    tenths=$(((${EPOCHREALTIME//[!0-9]/} - start) / 100000))
    printf '%5d.%d %s\n' $((tenths / 10)) $((tenths % 10)) "$line"
  done || status=$?
kill $vm 2>/dev/null || true

echo
tail -1 "$dir/time" | awk -v what="make ${targets[*]}" '{ printf "cold-build: %s took %s s wall; CPU %s s user + %s s sys = %.0f s (%.2f cores busy)\n", what, $1, $2, $3, $2 + $3, ($2 + $3) / $1 }'
# vmstat's columns: … us sy id wa st; the first sample is the average since boot.
awk 'NR > 3 && $1 ~ /^[0-9]+$/ { n++; t = (n) * 10; us += $13; sy += $14; id += $15
       if ($15 > 10) printf "cold-build:   %4d s: %d %% idle (%d %% user, %d %% sys)\n", t, $15, $13, $14 }
     END { if (n) printf "cold-build: %d samples: %.0f %% user, %.0f %% sys, %.0f %% idle on average\n", n, us / n, sy / n, id / n }' "$dir/vmstat"
exit "$status"
