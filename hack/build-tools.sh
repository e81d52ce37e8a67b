#!/usr/bin/env bash
# Builds the binaries the local control plane runs into bin/:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet
#     from k8s.io/kubernetes (module hack/k8s; the version is its go.mod's)
#   containerd, containerd-shim-runc-v2, ctr  (module hack/node: the runtime of
#     `lockstep dev up --real-nodes`; runc and the CNI plugins are Debian packages)
#   node-images: bin/images/{pause,rank}.tar, the OCI images real nodes import (hack/images)
#   kwok, controller-gen, client-gen, helm, ociimage  (module hack/tools)
#   krew, validate-krew-manifest          (module hack/krew)
#   golangci-lint, logcheck               (module hack/lint; only when named: `make lint`)
#   benchstat                             (module hack/bench; only when named: `make bench`)
#   <name>-controller                     (modules hack/integrations/<name>: the
#     peers' controllers the integration tests run, each at its go.mod's version)
# A binary is rebuilt only when the version recorded beside it differs (for a module's binaries, the
# version with a digest of its go.sum, so that hack/align moving a dependency rebuilds them).
# With names (hack/build-tools.sh etcd kwok jobset-controller …) only those are built:
# `make demo` builds what the demo runs. Each step says what it builds and how long it took.
# Steps run side by side (LOCKSTEP_BUILD_JOBS at once, 3 by default): one step's module
# downloads and links overlap another's compiling, and they share Go's build cache — with
# `make lockstep` and `go test` too. A package is compiled once for all of them when it is built
# with the same configuration (the Makefile's: CGO_ENABLED=0, -trimpath, no compiler DWARF, set
# here too for a direct call) and every module beneath it is at the same version (hack/align).
set -euo pipefail
export CGO_ENABLED=0
[[ " ${GOFLAGS:-} " == *" -trimpath "* ]] || export GOFLAGS="-trimpath${GOFLAGS:+ $GOFLAGS}"
gcflags=${LOCKSTEP_GCFLAGS-all=-dwarf=false} # the Makefile's GCFLAGS (empty: with DWARF)
[[ -z $gcflags || " $GOFLAGS " == *" -gcflags="* ]] || export GOFLAGS="$GOFLAGS -gcflags=$gcflags"
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin/.versions"
only=" $* "
[[ $only == *" node-images "* ]] && only+="ociimage "  # the images are written with it
total=$SECONDS

# wanted NAME: true when every binary is wanted (no names given) or NAME is one of them.
wanted() { [[ $only == "  " || $only == *" $1 "* ]]; }

# took START: how long since START, for the step's last line.
took() { echo "$((SECONDS - $1))s"; }

# step FUNCTION ARGS…: runs a build step in the background, at most LOCKSTEP_BUILD_JOBS at once;
# finish waits for them all and fails if any did.
jobs_max=${LOCKSTEP_BUILD_JOBS:-3}
pids=()
step() {
  while [[ $(jobs -rp | wc -l) -ge $jobs_max ]]; do wait -n || true; done
  "$@" &
  pids+=($!)
}
finish() {
  local failed=0 pid
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  pids=()
  if [[ $failed != 0 ]]; then echo "a build step failed (its output is above)" >&2; exit 1; fi
}

modversion() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }

# stale NAME VERSION: true when NAME is wanted and bin/NAME is missing or was built at another version.
stale() {
  wanted "$1" || return 1
  [[ -x "$bin/$1" ]] || return 0
  [[ "$(cat "$bin/.versions/$1" 2>/dev/null)" == "$2" ]] || return 0
  return 1
}

k8s_version=$(modversion "$root/hack/k8s" k8s.io/kubernetes)
etcd_version=$(modversion "$root/hack/k8s" go.etcd.io/etcd/server/v3)
minor=$(echo "$k8s_version" | cut -d. -f2)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# build_many DIR FLAGS WHAT NAME=VERSION=PKG…: one go build of every PKG (module DIR) into bin/NAME,
# NAME being PKG's last element, recording each VERSION. One build, one action graph: what the
# binaries share is compiled once, where builds side by side would each compile it at the same time.
build_many() {
  local dir=$1 flags=$2 what=$3 e start=$SECONDS pkgs=()
  shift 3
  for e in "$@"; do pkgs+=("${e##*=}"); done
  echo "building $what"
  (cd "$dir" && go build -ldflags "$flags" -o "$bin/" "${pkgs[@]}")
  for e in "$@"; do IFS='=' read -r name v _ <<<"$e"; echo "$v" > "$bin/.versions/$name"; done
  echo "built $what in $(took $start)"
}
# build_in DIR NAME VERSION PKG FLAGS WHAT: go build PKG (module DIR) into bin/NAME, recording VERSION.
build_in() {
  echo "building $6 $3"
  local start=$SECONDS
  (cd "$1" && go build -ldflags "$5" -o "$bin/$2" "$4")
  echo "$3" > "$bin/.versions/$2"
  echo "built $6 in $(took $start)"
}
# sums DIR: a digest of the module's go.sum, appended to a version so that a dependency moved by
# hack/align rebuilds the binary.
sums() { echo "+sum.$(sha256sum "$1/go.sum" | cut -c1-8)"; }

# The Kubernetes binaries and etcd (module hack/k8s), one build: they share etcd's client, gRPC and
# much of the apiserver.
k8s_version+=$(sums "$root/hack/k8s")
etcd_version+=$(sums "$root/hack/k8s")
k8s=()
for name in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do
  stale "$name" "$k8s_version" && k8s+=("$name=$k8s_version=k8s.io/kubernetes/cmd/$name")
done
stale etcd "$etcd_version" && k8s+=("etcd=$etcd_version=./etcd")
[[ ${#k8s[@]} -gt 0 ]] && step build_many "$root/hack/k8s" "$ldflags" \
  "${k8s[*]%%=*} ${k8s_version%+*} (etcd ${etcd_version%+*}; a cold build takes several minutes)" "${k8s[@]}"
# The dev tools (module hack/tools), one build.
tools=()
tools_flags="-s -w"
for tool in kwok:sigs.k8s.io/kwok:sigs.k8s.io/kwok/cmd/kwok controller-gen:sigs.k8s.io/controller-tools:sigs.k8s.io/controller-tools/cmd/controller-gen client-gen:k8s.io/code-generator:k8s.io/code-generator/cmd/client-gen helm:helm.sh/helm/v3:helm.sh/helm/v3/cmd/helm; do
  IFS=: read -r name mod pkg <<<"$tool"
  wanted "$name" || continue
  v=$(modversion "$root/hack/tools" "$mod")
  [[ $name == helm ]] && tools_flags+=" -X helm.sh/helm/v3/internal/version.version=$v"
  v+=$(sums "$root/hack/tools")
  stale "$name" "$v" && tools+=("$name=$v=$pkg")
done
# The image builder is this repository's own code: its version is its sources'.
v=; wanted ociimage && v=$(cat "$root/hack/tools/ociimage/"*.go "$root/hack/tools/go.sum" | sha256sum | cut -c1-16)
stale ociimage "$v" && tools+=("ociimage=$v=./ociimage")
[[ ${#tools[@]} -gt 0 ]] && step build_many "$root/hack/tools" "$tools_flags" "${tools[*]%%=*}" "${tools[@]}"
# krew and its manifest validator (module hack/krew: krew's dependencies are older than ours), one build.
krew=()
for name in krew validate-krew-manifest; do
  wanted "$name" || continue
  v=$(modversion "$root/hack/krew" sigs.k8s.io/krew)$(sums "$root/hack/krew")
  stale "$name" "$v" && krew+=("$name=$v=sigs.k8s.io/krew/cmd/$name")
done
[[ ${#krew[@]} -gt 0 ]] && step build_many "$root/hack/krew" "-s -w" "${krew[*]%%=*}" "${krew[@]}"
# The linters `make lint` runs (module hack/lint), built only when named: no test needs them.
for tool in golangci-lint:github.com/golangci/golangci-lint/v2:github.com/golangci/golangci-lint/v2/cmd/golangci-lint logcheck:sigs.k8s.io/logtools:sigs.k8s.io/logtools/logcheck; do
  IFS=: read -r name mod pkg <<<"$tool"
  [[ $only == *" $name "* ]] || continue
  v=$(modversion "$root/hack/lint" "$mod")
  stale "$name" "$v" && step build_in "$root/hack/lint" "$name" "$v" "$pkg" "-s -w" "$name"
done
# benchstat (module hack/bench), which `make bench` compares builds with: only when named.
if [[ $only == *" benchstat "* ]]; then
  v=$(modversion "$root/hack/bench" golang.org/x/perf)
  stale benchstat "$v" && step build_in "$root/hack/bench" benchstat "$v" golang.org/x/perf/cmd/benchstat "-s -w" benchstat
fi
# Other projects' controllers (module hack/integrations/<name> each, so that
# their dependencies meet neither Lockstep's nor each other's).
# tools.go names the package; when it is the module's own (a main that wires
# the project's packages, as Karpenter's with its test cloud provider), its
# version is a digest of the module's Go files and go.sum, so that an edit
# or a new pin rebuilds it.
# Controllers built on the same client-go build one after another in one step, so that the
# Kubernetes libraries they share (hack/align puts them at one patch) are compiled once, not by
# two builds side by side.
declare -A peers=()
for dir in "$root"/hack/integrations/*/; do
  name=$(basename "$dir")
  wanted "$name-controller" || continue
  pkg=$(sed -n 's/^import _ "\(.*\)"/\1/p' "$dir/tools.go")
  if [[ $pkg == "$(sed -n 's/^module //p' "$dir/go.mod")"/* ]]; then
    v=sources-$(find "$dir" -name '*.go' -print0 | sort -z | xargs -0 cat "$dir/go.sum" | sha256sum | cut -c1-16)
  else
    mod=$(sed -n 's/^require \([^ ]*\) .*/\1/p' "$dir/go.mod" | head -1)
    v=$(modversion "$dir" "$mod")$(sums "$dir")
  fi
  stale "$name-controller" "$v" && peers[$(modversion "$dir" k8s.io/client-go)]+="$dir=$name=$v=$pkg "
done
# build_peers DIR=NAME=VERSION=PKG…: each controller in turn.
build_peers() {
  local e dir name v pkg
  for e in "$@"; do
    IFS='=' read -r dir name v pkg <<<"$e"
    build_in "$dir" "$name-controller" "$v" "$pkg" "-s -w" "the $name controller"
  done
}
for group in "${peers[@]}"; do
  read -ra group <<<"$group"
  step build_peers "${group[@]}"
done
# The container runtime of real nodes (module hack/node), one build for its three binaries.
ctrd_version=$(modversion "$root/hack/node" github.com/containerd/containerd/v2)
ctrd_stamp=$ctrd_version$(sums "$root/hack/node")
ctrd_pkgs=()
for name in containerd containerd-shim-runc-v2 ctr; do
  stale "$name" "$ctrd_stamp" && ctrd_pkgs+=("github.com/containerd/containerd/v2/cmd/$name")
done
build_containerd() {
  echo "building ${ctrd_pkgs[*]##*/} $ctrd_version"
  local start=$SECONDS
  (cd "$root/hack/node" && go build -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$ctrd_version" -o "$bin/" "${ctrd_pkgs[@]}")
  for p in "${ctrd_pkgs[@]}"; do echo "$ctrd_stamp" > "$bin/.versions/${p##*/}"; done
  echo "built containerd in $(took $start)"
}
[[ ${#ctrd_pkgs[@]} -gt 0 ]] && step build_containerd
# The images real nodes import (no registry here): this repository's code, built static for this
# machine; their version is their sources' and the image builder's. They need ociimage first.
v=; wanted node-images && v=$(cat "$root"/hack/images/*/*.go "$root/hack/tools/ociimage/"*.go | sha256sum | cut -c1-16)
if wanted node-images && { [[ ! -f $bin/images/rank.tar || ! -f $bin/images/pause.tar ]] ||
  [[ "$(cat "$bin/.versions/node-images" 2>/dev/null)" != "$v" ]]; }; then
  finish
  echo "building the real nodes' images (pause, rank)"
  start=$SECONDS
  mkdir -p "$bin/images"
  for img in pause rank; do
    (cd "$root" && go build -ldflags "-s -w" -o "$bin/images/$img" "./hack/images/$img")
    "$bin/ociimage" -out "$bin/images/$img.tar" -tag "lockstep.local/$img:latest" -name "$img" -version latest \
      "linux/$(go env GOARCH)=$bin/images/$img" > /dev/null
  done
  echo "$v" > "$bin/.versions/node-images"
  echo "built the real nodes' images in $(took $start)"
fi
finish
echo "tools ready in $(took $total)"
