#!/usr/bin/env bash
# Entrypoint of the isaac-ppo images (docker/Dockerfile, docker/Dockerfile.isaacgym):
#
#   ENTRYPOINT ["isaac-ppo-entrypoint", "isaac-ppo-train", "sim=isaacgym", "headless=true", "--"]
#   CMD []
#
# The words before "--" are the command and its default overrides; the words after it are what was typed
# after the image name (`docker run IMAGE task=Ant -m seed=0,1`). Hydra's command line takes its flags (-m,
# --cfg job, --info, ...) before or after all the overrides, never between them ("unrecognized arguments"),
# and a flag with an optional value (--info [defaults]) takes the next word as its value when that word is one
# of the values it accepts and fails on any other word ("invalid choice: 'sim=mujoco'"). So this runs
#
#   COMMAND  <the defaults the user did not override>  <the user's overrides>  <the user's flags>
#
# the flags last, in the order typed, each with its value when one was typed: no default ever lands after a
# flag as its value. A default is dropped when the user sets the same key (sim=mujoco replaces sim=isaacgym),
# and all of them are dropped for --hydra-help, which composes Hydra's own config without the application's
# (a default such as sim=mujoco would fail it: "Could not override 'sim'"). A first word that is a program on
# PATH (bash, python, isaac-ppo-report, ...) runs that program instead.
#
# In NGC images (docker/Dockerfile.isaacgym) the command starts through NVIDIA's own entrypoint, as it would
# without ours: its driver checks, CUDA forward compatibility on older data-center drivers, its banner.
#
# Caches: Isaac Gym's gymtorch compiles a torch extension into TORCH_EXTENSIONS_DIR at first import, and
# matplotlib wants a writable MPLCONFIGDIR. Under `docker run --user UID`, apptainer or enroot the process is
# not the image's user and its home is not writable: such a directory then moves to ${TMPDIR:-/tmp}.
#
# Files in a mounted runs/ belong to the uid the container runs as: `docker run --user "$(id -u):$(id -g)"`
# makes them yours (docker/build_and_run_cpu.sh checks it). When runs/ is not writable, one line says so.
set -euo pipefail

writable_or_tmp() {  # VAR NAME: keep $VAR if it is (or can be made) a writable directory, else a per-user tmp dir
  local var="$1" name="$2" dir
  dir="${!var:-}"
  if [ -n "$dir" ] && mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; then
    return 0
  fi
  dir="${TMPDIR:-/tmp}/${name}-$(id -u)"
  mkdir -p "$dir"
  export "$var=$dir"
}

launch() {  # exec a command, through NVIDIA's NGC entrypoint when the image has one
  local ngc="${ISAAC_PPO_NGC_ENTRYPOINT:-/opt/nvidia/nvidia_entrypoint.sh}"
  if [ -x "$ngc" ]; then
    exec "$ngc" "$@"
  fi
  exec "$@"
}

key_of() {  # the config key an override sets: +key=v, ++key=v, ~key, ~key=v, key=v -> key
  local word="$1"
  word="${word#"${word%%[!+~]*}"}"
  printf '%s' "${word%%=*}"
}

command_and_defaults=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  command_and_defaults+=("$1")
  shift
done
if [ "$#" -gt 0 ]; then
  shift  # the "--"
fi
if [ "${#command_and_defaults[@]}" -eq 0 ]; then
  echo "isaac-ppo-entrypoint: usage: isaac-ppo-entrypoint COMMAND [DEFAULT_OVERRIDE...] -- [ARG...]" >&2
  exit 2
fi

if [ -n "${TORCH_EXTENSIONS_DIR:-}" ]; then
  writable_or_tmp TORCH_EXTENSIONS_DIR torch_extensions
fi
if [ -n "${MPLCONFIGDIR:-}" ] || [ ! -w "${HOME:-/}" ]; then
  writable_or_tmp MPLCONFIGDIR matplotlib
fi

# `docker run IMAGE bash`, `docker run IMAGE isaac-ppo-report runs/multirun/...`
if [ "$#" -gt 0 ] && [[ "$1" != -* && "$1" != *=* && "$1" != [+~]* ]] && command -v "$1" >/dev/null 2>&1; then
  launch "$@"
fi

flags=()
overrides=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --cfg | -c | --package | -p | --config-path | -cp | --config-name | -cn | --config-dir | -cd | --experimental-rerun)
      flags+=("$1")  # a flag with a value
      shift
      if [ "$#" -gt 0 ]; then
        flags+=("$1")
        shift
      fi
      ;;
    --info | -i)
      flags+=("$1")  # an optional value
      shift
      case "${1:-}" in
        all | config | defaults | defaults-tree | plugins | searchpath)
          flags+=("$1")
          shift
          ;;
      esac
      ;;
    -*)
      flags+=("$1")  # -m, --multirun, --resolve, --help, --cfg=job, ...
      shift
      ;;
    *)
      overrides+=("$1")
      shift
      ;;
  esac
done

hydra_help=false
for word in ${flags[@]+"${flags[@]}"}; do
  if [ "$word" = --hydra-help ]; then
    hydra_help=true
  fi
done

argv=("${command_and_defaults[0]}")
for default in ${command_and_defaults[@]+"${command_and_defaults[@]:1}"}; do
  overridden="$hydra_help"
  for word in ${overrides[@]+"${overrides[@]}"}; do
    if [ "$(key_of "$word")" = "$(key_of "$default")" ]; then
      overridden=true
      break
    fi
  done
  if [ "$overridden" = false ]; then
    argv+=("$default")
  fi
done
argv+=(${overrides[@]+"${overrides[@]}"} ${flags[@]+"${flags[@]}"})

# A mounted runs/ this uid cannot write (`docker run` without --user on a folder the image's user does not
# own): training stops with "runs_dir=runs cannot be written"; say which uid owns it and how to run as it.
runs_dir_set=false
for word in ${overrides[@]+"${overrides[@]}"}; do
  if [ "$(key_of "$word")" = runs_dir ]; then
    runs_dir_set=true
  fi
done
if [ "$runs_dir_set" = false ] && [ -d runs ] && [ ! -w runs ]; then
  echo "isaac-ppo-entrypoint: $PWD/runs (owner $(stat -c %u:%g runs)) is not writable by uid $(id -u):" \
       "run the container as the folder's owner (docker run --user \"\$(id -u):\$(id -g)\" ..., which works" \
       "for root too), or build the image with --build-arg USER_UID=\$(id -u) (for root that is 0: the image" \
       "then runs as root)" >&2
fi
launch "${argv[@]}"
