#!/usr/bin/env bash
# The decision core's benchmarks (every Benchmark under internal/: a gang
# decided at 5,000 nodes, the simulated week, the what-if of a manifest, …),
# in memory, no cluster.
#
# With LOCKSTEP_BENCH_BASELINE_REV=<git revision> (e.g. the previous
# release's tag) the same benchmarks of that revision run too, interleaved
# with the current tree's round by round (the machine's load drifts; both
# builds see the same drift), and benchstat prints them side by side: a
# regression shows as a ratio, with its significance.
#
#   LOCKSTEP_BENCH_COUNT    rounds (default 3; benchstat wants several)
#   LOCKSTEP_BENCH_FILTER   -bench regexp (default .)
#   LOCKSTEP_BENCH_PKGS     packages (default: every internal package with a benchmark)
# Results: bin/bench/{current,baseline}.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="$root/bin/bench"
mkdir -p "$out"
count=${LOCKSTEP_BENCH_COUNT:-3}
filter=${LOCKSTEP_BENCH_FILTER:-.}
rev=${LOCKSTEP_BENCH_BASELINE_REV:-}
read -r -a pkgs <<<"${LOCKSTEP_BENCH_PKGS:-$(grep -l '^func Benchmark' internal/*/*_test.go internal/*/*/*_test.go 2>/dev/null | xargs -n1 dirname | sort -u | sed 's|^|./|' | tr '\n' ' ')}"
[[ ${#pkgs[@]} -gt 0 ]] || { echo "no benchmarks found" >&2; exit 1; }

# compile TREE NAME: a test binary per package of TREE into $out/NAME/.
compile() {
  local tree=$1 name=$2 p
  rm -rf "${out:?}/$name" && mkdir -p "$out/$name"
  for p in "${pkgs[@]}"; do
    if [[ ! -d "$tree/$p" ]]; then
      echo "$name: $p does not exist there; not compared"
      continue
    fi
    (cd "$tree" && go test -c -o "$out/$name/$(echo "${p#./}" | tr / _).test" "$p")
  done
}

# round NAME FILE: one run of every benchmark of build NAME, appended to FILE.
round() {
  local name=$1 file=$2 p bin
  for p in "${pkgs[@]}"; do
    bin="$out/$name/$(echo "${p#./}" | tr / _).test"
    [[ -x $bin ]] || continue
    # A test binary runs in its package's directory (testdata).
    # A failed run (a bad filter, a benchmark that fails) stops the
    # comparison instead of leaving a build's results out of it.
    if ! (cd "$3/$p" && "$bin" -test.run '^$' -test.bench "$filter" -test.benchmem -test.count 1) >"$out/run.txt" 2>&1; then
      cat "$out/run.txt" >&2
      echo "$name: $p failed" >&2
      exit 1
    fi
    cat "$out/run.txt" >>"$file"
    grep -E '^Benchmark' "$out/run.txt" || true
  done
}

echo "machine: $(hostname), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(go version)"
compile "$root" current
: > "$out/current.txt"
if [[ -z $rev ]]; then
  for ((i = 1; i <= count; i++)); do
    echo "round $i of $count"
    round current "$out/current.txt" "$root"
  done
  exit 0
fi

worktree="$out/baseline-tree"
git worktree remove --force "$worktree" 2>/dev/null || rm -rf "$worktree"
git worktree add --detach -q "$worktree" "$rev"
trap 'git worktree remove --force "$worktree" 2>/dev/null || true' EXIT
compile "$worktree" baseline
: > "$out/baseline.txt"
for ((i = 1; i <= count; i++)); do
  echo "round $i of $count: baseline $rev, then the current tree"
  round baseline "$out/baseline.txt" "$worktree"
  round current "$out/current.txt" "$root"
done
hack/build-tools.sh benchstat > /dev/null
echo
echo "baseline: $rev ($(git rev-parse --short "$rev")); current: $(git describe --always --dirty)"
"$root/bin/benchstat" baseline="$out/baseline.txt" current="$out/current.txt"
