#!/usr/bin/env bash
# Builds the CPU image (docker/Dockerfile) and runs it for real, on a machine with a Docker engine but no
# container registry (only a Debian mirror and PyPI, maybe behind a TLS-signing proxy). Not part of the test
# suite. From anywhere:
#
#   bash docker/build_and_run_cpu.sh
#
# Needs: root (debootstrap and chroot make the base image; not needed when BASE_IMAGE exists), debootstrap
# (apt-get install -y debootstrap), a running Docker engine and a client that builds with BuildKit (a Docker
# >= 23 client with the buildx plugin, or a 20.10 client, which gets DOCKER_BUILDKIT=1; a client without buildx
# falls back to the legacy builder, which cannot build docker/Dockerfile), python3 with pip on the host, and
# the Debian mirror and PyPI. Each missing piece stops it with a one-line message (exit 3).
#
# 1. a base image: `debootstrap bookworm` from the Debian mirror apt uses here, with python3 and a venv on
#    PATH (/opt/python), imported with `docker import` (kept: skipped when BASE_IMAGE already exists);
# 2. torch: the host's pip downloads torch==TORCH_VERSION and its dependencies (here: the CPU build) into a
#    folder laid out as a PEP 503 simple index, served on 127.0.0.1 for the build (`--network=host`);
# 3. the image: docker/Dockerfile with --build-arg BASE_IMAGE and TORCH_INDEX_URL, the host's CA bundle as
#    the build secret pip_cert (used by pip for PyPI, not stored in the image); wall time and size;
# 4. runs: a short training and a resume (resume=auto, more iterations) with a host folder as runs/, once
#    as the calling user (--user "$(id -u):$(id -g)") and once as a non-root uid (1234) that owns its folder;
#    checks the exit statuses, the owner of every file written, and that metrics.jsonl goes on across the
#    resume;
# 5. Hydra's flags through the image's entrypoint: `task=Cartpole --info`, `--info defaults task=Cartpole`,
#    `--hydra-help`, `--cfg job task=Cartpole` must exit 0.
#
# Idempotent: the base image, the rootfs and the wheels are reused, the run folders are made anew. Settings
# (environment):
#   WORK              scratch folder (rootfs, wheels, logs, runs)       default /var/tmp/isaac-ppo-docker
#   IMAGE             tag of the image built                            default isaac-ppo:cpu
#   BASE_IMAGE        the base; made with debootstrap if missing        default isaac-ppo-base:bookworm-py3.11
#   DEBIAN_MIRROR     for debootstrap and the image's apt              default: the one apt uses here
#   TORCH_VERSION     default 2.13.0
#   TORCH_INDEX_URL   use this index for torch instead of the local one (e.g. https://download.pytorch.org/whl/cpu)
#   INDEX_PORT        the local index's port on 127.0.0.1 (another if taken)  default 38765
#   PIP_CERT_FILE     CA bundle given to pip in the build               default: pip's cert, $PIP_CERT, ... or none
#   NO_CACHE=1        build without Docker's layer cache (a full build, for the timing)
#   REBUILD_BASE=1    make the base image again
#   EXTRAS            the package's extras in the image (build arg)  default video; video,mjwarp for sim=mjwarp
#   WARP_CUDA_ARCHS   with mjwarp: CUDA archs compiled ahead of time (build arg)  default: the Dockerfile's
#   RUN_ARGS          the training overrides   default "task=Cartpole num_envs=64 agent.minibatch_size=256"
#   OTHER_UID         the non-root uid of the second pair of runs       default 1234
#   DOCKER            the docker client to use (only it)                default: the first that can build
#   USER_UID          the image's uid (build arg; 0 makes it run as root)  default: yours; root keeps 1000
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${WORK:-/var/tmp/isaac-ppo-docker}"
IMAGE="${IMAGE:-isaac-ppo:cpu}"
BASE_IMAGE="${BASE_IMAGE:-isaac-ppo-base:bookworm-py3.11}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
RUN_ARGS="${RUN_ARGS:-task=Cartpole num_envs=64 agent.minibatch_size=256}"
OTHER_UID="${OTHER_UID:-1234}"
PYTHON_MINOR=3.11  # Debian bookworm's python3: the wheels are downloaded for it
HOST_PYTHON="${HOST_PYTHON:-python3}"

say() { printf '[build_and_run_cpu] %s\n' "$*"; }
die() { printf '[build_and_run_cpu] ERROR: %s\n' "$1" >&2; exit "${2:-1}"; }  # MESSAGE [STATUS]

# --- a Docker engine, and a client that builds with BuildKit (RUN --mount=type=secret) ---------------------
# The legacy builder cannot build docker/Dockerfile (RUN --mount). A Docker >= 23 client builds with BuildKit
# only through the buildx plugin: without it `docker build` falls back to the legacy builder (and
# DOCKER_BUILDKIT=1 makes it fail: "BuildKit is enabled but the buildx component is missing"). A 20.10 client
# has BuildKit built in behind DOCKER_BUILDKIT=1. Either way its `build --help` then lists --secret.

BUILD=()
no_engine=()
no_buildkit=()
pick_docker() {
  local candidate candidates
  if [ -n "${DOCKER:-}" ]; then
    candidates=("$DOCKER")
  else
    candidates=(docker /usr/bin/docker /usr/local/bin/docker)
  fi
  for candidate in "${candidates[@]}"; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    if ! "$candidate" info >/dev/null 2>&1; then
      no_engine+=("$candidate"); continue
    fi
    if DOCKER_BUILDKIT=1 "$candidate" build --help 2>/dev/null | grep -q -- '--secret'; then
      DOCKER="$candidate"; BUILD=(env DOCKER_BUILDKIT=1 "$candidate" build); return 0
    fi
    no_buildkit+=("$candidate ($("$candidate" version --format '{{.Client.Version}}' 2>/dev/null || echo '?'))")
  done
  return 1
}
if ! pick_docker; then
  if [ "${#no_buildkit[@]}" -gt 0 ]; then
    die "no docker client here builds with BuildKit, which docker/Dockerfile needs (RUN --mount): ${no_buildkit[*]} has no buildx plugin (\`docker buildx version\` fails), so it uses the legacy builder: install the plugin (docker-buildx-plugin from Docker's apt repository, or Debian/Ubuntu's docker-buildx), or use a Docker 20.10 client (Debian bookworm's docker.io) with DOCKER=/usr/bin/docker" 3
  elif [ "${#no_engine[@]}" -gt 0 ]; then
    die "no Docker engine answers \`${no_engine[0]} info\`: start one (dockerd > /tmp/dockerd.log 2>&1 &, or systemctl start docker)" 3
  fi
  die "no docker client${DOCKER:+ at DOCKER=$DOCKER}: install Docker (Debian: apt-get install docker.io) and start dockerd" 3
fi
say "docker client: $DOCKER ($("$DOCKER" version --format '{{.Client.Version}} / engine {{.Server.Version}}'))"

mkdir -p "$WORK/logs"
command -v "$HOST_PYTHON" >/dev/null 2>&1 || die "$HOST_PYTHON not found (set HOST_PYTHON to a python3 with pip)" 3

# --- 1. the base image -----------------------------------------------------------------------------------

debian_mirror() {  # the first Debian archive apt uses here (deb822 sources or sources.list)
  local uri
  uri="$(grep -h -E '^\s*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' \
         | grep -E '/debian/?$' | head -n 1 || true)"
  if [ -z "$uri" ]; then
    uri="$(grep -h -E '^\s*deb\s' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
           | awk '{for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {print $i; break}}' \
           | grep -E '/debian/?$' | head -n 1 || true)"
  fi
  printf '%s' "${uri:-http://deb.debian.org/debian}"
}
DEBIAN_MIRROR="${DEBIAN_MIRROR:-$(debian_mirror)}"
DEBIAN_MIRROR="${DEBIAN_MIRROR%/}"

base_seconds=0
if [ "${REBUILD_BASE:-0}" = 1 ] || ! "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null 2>&1 \
    || die "debootstrap is missing (it makes the base image $BASE_IMAGE): apt-get install -y debootstrap" 3
  [ "$(id -u)" = 0 ] || die "making the base image needs root (debootstrap, chroot): run as root, or give BASE_IMAGE" 3
  start=$SECONDS
  rootfs="$WORK/rootfs"
  if [ "${REBUILD_BASE:-0}" = 1 ] || [ ! -e "$rootfs/.isaac-ppo-complete" ]; then
    rm -rf "$rootfs"
    say "debootstrap bookworm from $DEBIAN_MIRROR into $rootfs (log: $WORK/logs/debootstrap.log)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$rootfs" "$DEBIAN_MIRROR" > "$WORK/logs/debootstrap.log" 2>&1 \
      || { tail -n 20 "$WORK/logs/debootstrap.log" >&2; die "debootstrap failed"; }
    # Like Docker Hub's slim images: no documentation from later apt installs either.
    cat > "$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
    find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
    rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR bookworm main
deb $DEBIAN_MIRROR bookworm-updates main
deb ${DEBIAN_MIRROR%/debian}/debian-security bookworm-security main
EOF
    # `python` and `pip` on PATH, writable by root, not Debian's externally managed /usr: a venv
    chroot "$rootfs" /usr/bin/python3 -m venv /opt/python
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/root/.cache
    touch "$rootfs/.isaac-ppo-complete"
  fi
  say "docker import $BASE_IMAGE"
  tar -C "$rootfs" --exclude=./.isaac-ppo-complete -c . | "$DOCKER" import \
    --change 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python"]' \
    - "$BASE_IMAGE" > /dev/null
  base_seconds=$((SECONDS - start))
  say "base image made in ${base_seconds}s"
else
  say "base image $BASE_IMAGE exists (REBUILD_BASE=1 makes it again)"
fi
"$DOCKER" run --rm --network=none "$BASE_IMAGE" python -c \
  "import sys; assert sys.version_info >= (3, 10), sys.version; print('base python', sys.version.split()[0])"

# --- 2. torch from a local PEP 503 index ------------------------------------------------------------------

SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

if [ -z "${TORCH_INDEX_URL:-}" ]; then
  index="$WORK/torch-index"
  wheels="$index/wheels"
  mkdir -p "$wheels"
  if [ -z "$(find "$wheels" -maxdepth 1 -name "torch-$TORCH_VERSION*.whl")" ]; then
    say "pip download torch==$TORCH_VERSION (for CPython $PYTHON_MINOR) into $wheels"
    "$HOST_PYTHON" -m pip download --only-binary=:all: --python-version "$PYTHON_MINOR" --implementation cp \
      --dest "$wheels" "torch==$TORCH_VERSION" > "$WORK/logs/pip-download.log" 2>&1 \
      || { tail -n 20 "$WORK/logs/pip-download.log" >&2; die "pip download torch failed"; }
  fi
  torch_wheel="$(find "$wheels" -maxdepth 1 -name "torch-$TORCH_VERSION*.whl" -printf '%f\n' | sort | head -n 1)"
  case "$torch_wheel" in
    *+cpu*) ;;
    *) die "$torch_wheel is not a CPU build (the PyPI build pulls the CUDA libraries): put the +cpu wheel in
  $wheels, or set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu where that is reachable" ;;
  esac
  # simple/<normalized name>/index.html, one link per file with its sha256
  "$HOST_PYTHON" - "$index" <<'EOF'
import hashlib, html, pathlib, re, sys, urllib.parse
root = pathlib.Path(sys.argv[1])
projects = {}
for wheel in sorted((root / "wheels").glob("*.whl")):
    name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
    projects.setdefault(name, []).append(wheel)
simple = root / "simple"
simple.mkdir(exist_ok=True)
links = "".join(f'<a href="{n}/">{n}</a><br>\n' for n in sorted(projects))
(simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
for name, files in projects.items():
    (simple / name).mkdir(exist_ok=True)
    rows = "".join(
        f'<a href="../../wheels/{urllib.parse.quote(f.name)}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">'
        f"{html.escape(f.name)}</a><br>\n" for f in files)
    (simple / name / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{rows}</body></html>\n")
EOF
  # A fixed port keeps TORCH_INDEX_URL, and so Docker's layer cache, the same from one run to the next.
  port="$("$HOST_PYTHON" - "${INDEX_PORT:-38765}" <<'EOF'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:  # taken: any free port
    s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
EOF
  )"
  "$HOST_PYTHON" -m http.server --bind 127.0.0.1 --directory "$index" "$port" > "$WORK/logs/index-server.log" 2>&1 &
  SERVER_PID=$!
  TORCH_INDEX_URL="http://127.0.0.1:$port/simple"
  for _ in $(seq 50); do
    if "$HOST_PYTHON" -c "import urllib.request; urllib.request.urlopen('$TORCH_INDEX_URL/torch/', timeout=1)" \
        2>/dev/null; then break; fi
    sleep 0.2
  done
  say "torch index: $TORCH_INDEX_URL ($torch_wheel and $(($(find "$wheels" -name '*.whl' | wc -l) - 1)) dependencies)"
fi

# --- 3. the image -----------------------------------------------------------------------------------------

cert="${PIP_CERT_FILE:-${PIP_CERT:-}}"
if [ -z "$cert" ]; then
  cert="$("$HOST_PYTHON" -m pip config get global.cert 2>/dev/null || true)"
fi
cert="${cert:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}}"
build_args=(--network=host -f docker/Dockerfile -t "$IMAGE"
            --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "TORCH_VERSION=$TORCH_VERSION"
            --build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL")
if [ -n "${USER_UID:-}" ]; then
  build_args+=(--build-arg "USER_UID=$USER_UID")
elif [ "$(id -u)" != 0 ]; then
  build_args+=(--build-arg "USER_UID=$(id -u)")  # the image's user is you (root keeps the default 1000)
fi
if [ -n "${EXTRAS:-}" ]; then
  build_args+=(--build-arg "EXTRAS=$EXTRAS")
fi
if [ -n "${WARP_CUDA_ARCHS:-}" ]; then
  build_args+=(--build-arg "WARP_CUDA_ARCHS=$WARP_CUDA_ARCHS")
fi
if [ -s "$cert" ]; then
  build_args+=(--secret "id=pip_cert,src=$cert")
  say "pip in the build trusts $cert (build secret pip_cert, not stored in the image)"
fi
if [ "${NO_CACHE:-0}" = 1 ]; then
  build_args+=(--no-cache)
fi
say "building $IMAGE: ${BUILD[*]} ${build_args[*]} .   (log: $WORK/logs/build.log)"
start=$SECONDS
start_ns=$(date +%s%N)
if ! (cd "$ROOT" && "${BUILD[@]}" --progress=plain "${build_args[@]}" .) > "$WORK/logs/build.log" 2>&1; then
  tail -n 40 "$WORK/logs/build.log" >&2
  die "docker build failed (whole log: $WORK/logs/build.log)"
fi
build_seconds=$(( ($(date +%s%N) - start_ns) / 1000000 ))
build_time="$((build_seconds / 1000)).$(printf '%03d' $((build_seconds % 1000)) | cut -c1)s"
size_bytes="$("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE")"
size_human="$("$DOCKER" images --format '{{.Size}}' "$IMAGE" | head -n 1)"
say "built $IMAGE in $build_time ($((SECONDS - start))s); size $size_human ($size_bytes bytes)"
grep -E '^#[0-9]+ [0-9.]+ (Name|Version): ' "$WORK/logs/build.log" | sed 's/^#[0-9]* [0-9.]* /  /' || true

# --- 4. training and a resume, as the caller and as another uid -------------------------------------------

failures=0
results=()
check_runs() {  # LABEL DIR UID GID: ownership and metrics continuity of the two runs in DIR
  local label="$1" dir="$2" uid="$3" gid="$4" foreign
  foreign="$(find "$dir" \( ! -uid "$uid" -o ! -gid "$gid" \) -printf '%u:%g %p\n' | head -n 5)"
  if [ -n "$foreign" ]; then
    results+=("$label: files not owned by $uid:$gid: $foreign"); failures=$((failures + 1))
  else
    results+=("$label: all $(find "$dir" | wc -l) paths under $dir owned by $uid:$gid")
  fi
  local continuity
  if continuity="$("$HOST_PYTHON" - "$dir" <<'EOF'
import json, pathlib, sys
runs = sorted(pathlib.Path(sys.argv[1]).glob("*/*/metrics.jsonl"), key=lambda p: p.parent.name)
assert len(runs) == 2, f"expected 2 run folders, found {[str(r) for r in runs]}"
rows = [[json.loads(line) for line in r.read_text().splitlines() if line.strip()] for r in runs]
its = [[row["iteration"] for row in rs] for rs in rows]
steps = [[row["env_steps"] for row in rs] for rs in rows]
together = its[0] + its[1]
assert together == list(range(len(together))), f"iterations {its} do not continue"
assert all(b > a for a, b in zip(steps[0] + steps[1], (steps[0] + steps[1])[1:])), f"env_steps {steps}"
print(f"metrics.jsonl iterations {its[0]} then {its[1]} after the resume, env_steps {steps[0][-1]} -> {steps[1][-1]}")
EOF
  )"; then
    results+=("$label: $continuity")
  else
    results+=("$label: metrics.jsonl does not continue: $continuity"); failures=$((failures + 1))
  fi
}

run_pair() {  # LABEL UID GID: a fresh runs/ folder owned by UID:GID, a training, then resume=auto
  local label="$1" uid="$2" gid="$3" dir="$WORK/runs-$1" rc first second
  rm -rf "$dir"
  mkdir -p "$dir"
  chown "$uid:$gid" "$dir"
  local overrides run
  read -r -a overrides <<< "$RUN_ARGS"  # one override per word
  run=("$DOCKER" run --rm --network=none --shm-size=2g --user "$uid:$gid" -v "$dir:/workspace/runs" "$IMAGE")
  say "$label: ${run[*]} $RUN_ARGS max_iterations=3"
  set +e
  "${run[@]}" "${overrides[@]}" max_iterations=3 > "$WORK/logs/run-$label-1.log" 2>&1
  first=$?
  say "$label: ${run[*]} $RUN_ARGS max_iterations=6 resume=auto"
  "${run[@]}" "${overrides[@]}" max_iterations=6 resume=auto > "$WORK/logs/run-$label-2.log" 2>&1
  second=$?
  set -e
  results+=("$label (--user $uid:$gid): exit statuses $first (train, max_iterations=3), $second (resume=auto, max_iterations=6)")
  for rc in "$first" "$second"; do
    if [ "$rc" != 0 ]; then failures=$((failures + 1)); fi
  done
  if [ "$first" != 0 ] || [ "$second" != 0 ]; then
    tail -n 15 "$WORK/logs/run-$label-1.log" "$WORK/logs/run-$label-2.log" >&2
  fi
  tail -n 2 "$WORK/logs/run-$label-2.log" | sed 's/^/  /'
  check_runs "$label" "$dir" "$uid" "$gid"
}

run_pair caller "$(id -u)" "$(id -g)"
if [ "$OTHER_UID" != "$(id -u)" ]; then
  if [ "$(id -u)" = 0 ]; then
    run_pair "uid$OTHER_UID" "$OTHER_UID" "$OTHER_UID"
  else
    say "not root: the run as uid $OTHER_UID (a folder chowned to it) is left out"
  fi
fi

# --- 5. Hydra's flags through the image's entrypoint ---------------------------------------------------------
# --info without a value after an override (the image's defaults must not become its value), --hydra-help
# (composes without the application's config: the defaults must not be passed), --cfg job with a flag first.

flag_check() {  # EXPECTED ARG...: `docker run IMAGE ARG...` exits 0 and prints a line with EXPECTED
  local expected="$1" out rc
  shift
  set +e
  out="$("$DOCKER" run --rm --network=none "$IMAGE" "$@" 2>&1)"
  rc=$?
  set -e
  if [ "$rc" = 0 ] && grep -q -- "$expected" <<< "$out"; then
    results+=("docker run $IMAGE $*: exit 0, prints '$expected'")
  else
    results+=("docker run $IMAGE $*: exit $rc, '$expected' $(grep -q -- "$expected" <<< "$out" && echo printed || echo 'not printed'): $(tail -n 2 <<< "$out" | tr '\n' ' ')")
    failures=$((failures + 1))
  fi
}
say "flags: --info, --hydra-help, --cfg job through the entrypoint"
flag_check "Defaults Tree" task=Cartpole --info
flag_check "Defaults List" --info defaults task=Cartpole
flag_check "== Flags ==" --hydra-help
flag_check "^sim: mujoco" --cfg job task=Cartpole

# --- figures -----------------------------------------------------------------------------------------------

{
  echo "date:        $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "engine:      $("$DOCKER" version --format '{{.Server.Version}}'), storage driver $("$DOCKER" info --format '{{.Driver}}')"
  echo "base image:  $BASE_IMAGE ($("$DOCKER" images --format '{{.Size}}' "$BASE_IMAGE" | head -n 1))$([ "$base_seconds" -gt 0 ] && echo ", made in ${base_seconds}s")"
  echo "build:       ${BUILD[*]} ${build_args[*]} ."
  echo "build time:  $build_time wall clock$([ "${NO_CACHE:-0}" = 1 ] && echo ' (--no-cache)')"
  echo "image size:  $size_human ($size_bytes bytes)"
  for line in "${results[@]}"; do echo "run:         $line"; done
} | tee "$WORK/summary.txt"
if [ "$failures" -gt 0 ]; then
  die "$failures check(s) failed; logs in $WORK/logs"
fi
say "all checks passed; summary in $WORK/summary.txt"
