"""The front door: the Makefile's setup step and the README's own example module."""
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _write_script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_setup_fails_loudly_when_pip_install_fails(tmp_path):
    # A venv whose pip fails and whose python imports anything: only pip's exit code tells.
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    _write_script(bin_dir / "pip", 'echo "ERROR: no matching distribution" >&2; exit 1')
    _write_script(bin_dir / "python", "exit 0")
    stamp = tmp_path / "venv" / ".requirements-installed"

    done = subprocess.run(["make", "-C", str(REPO), f"VENV={tmp_path / 'venv'}", str(stamp)],
                          capture_output=True, text=True)

    assert done.returncode != 0
    assert "pip install -r requirements.txt failed" in done.stderr
    assert "no matching distribution" in done.stderr
    assert not stamp.exists()


def _readme_module() -> str:
    text = (REPO / "README.md").read_text()
    return re.search(r"```python\n# myproject/agents\.py\n(.*?)```", text, re.S).group(1)


def test_readme_example_module_answers_offline_as_printed_next_to_the_examples(tmp_path):
    # The README tells users to list their module after examples.functions: the two must coexist, the
    # question it prints must get the answer it promises on the offline model, and no toolset is mixed.
    readme = (REPO / "README.md").read_text()
    question = re.search(r'Ask "([^"]+)": the model calls `find_notes`', readme).group(1)
    (tmp_path / "myproject").mkdir()
    (tmp_path / "myproject" / "agents.py").write_text(_readme_module())
    script = ("import examples.functions, myproject.agents as module\n"
              f"print(module.librarian({question!r}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == '- find_notes: ["Ada wrote the recursion guard."]', done.stdout
    assert "toolset" not in done.stderr  # no warning of a toolset shared with examples.functions


def test_readme_is_a_front_page_that_links_every_docs_page():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    pages = {path.relative_to(REPO).as_posix() for path in (REPO / "docs").glob("*.md")}
    assert pages and not {page for page in pages if f"]({page})" not in readme}
    assert "](docs/screenshot.png)" in readme and (REPO / "docs" / "screenshot.png").exists()


def _logging_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A set-up venv whose commands only log themselves, except the port check, which runs for real."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.log"
    log.touch()
    _write_script(venv / "bin" / "python", f'echo "python $*" >> {log}\n'
                                           f'case "$1" in bin/ensure-port-free) exec {sys.executable} "$@";; esac')
    _write_script(venv / "bin" / "daphne", f'echo "daphne $*" >> {log}')
    (venv / ".requirements-installed").touch()
    return venv, log


def _make_run(venv: Path, port: int | str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(REPO), f"VENV={venv}", "HOST=127.0.0.1", f"PORT={port}", "run"],
                          capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_run_on_a_busy_port_leaves_the_serving_servers_runs_alone(tmp_path):
    venv, log = _logging_venv(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _make_run(venv, port)

    assert done.returncode != 0
    assert f"127.0.0.1:{port}" in done.stderr and "make run PORT=" in done.stderr
    assert log.read_text().splitlines() == [f"python bin/ensure-port-free 127.0.0.1 {port}"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("port", ["abc", "70000", "0", ""])
def test_run_on_a_port_that_is_no_port_says_so_in_one_line(tmp_path, port):
    venv, log = _logging_venv(tmp_path)
    done = _make_run(venv, port)
    assert done.returncode != 0
    assert f"make run: PORT must be a whole number from 1 to 65535, got {port!r}" in done.stderr
    assert "Traceback" not in done.stderr
    assert [line for line in log.read_text().splitlines() if "ensure-port-free" not in line] == []  # nothing started


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_run_starts_django_once_before_serving(tmp_path):
    # Each Django start-up costs about a second; a second `make run` should not pay it three times.
    venv, log = _logging_venv(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    done = _make_run(venv, port)

    assert done.returncode == 0, done.stderr
    calls = [line for line in log.read_text().splitlines() if "ensure-port-free" not in line]
    assert calls == [f"python bin/prepare-run 127.0.0.1 {port}",
                     f"daphne -b 127.0.0.1 -p {port} openprogram_web.serve:application"]


TEST_TOOLS = ("pytest", "pytest-django", "pytest-asyncio", "playwright", "schemathesis", "hypothesis", "websockets")


def _pinned(requirements: str) -> set[str]:
    lines = (REPO / requirements).read_text().splitlines()
    return {line.split("==")[0].split("[")[0] for line in lines if "==" in line and not line.startswith("#")}


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_run_installs_only_what_serving_needs_and_test_adds_the_test_tools(tmp_path):
    # Playwright alone is 165 MB of a fresh clone's venv, and only the tests and benches drive a browser.
    assert not _pinned("requirements.txt") & set(TEST_TOOLS)
    assert set(TEST_TOOLS) <= _pinned("requirements-test.txt")
    venv = tmp_path / "venv"
    planned = {target: subprocess.run(["make", "-n", "-C", str(REPO), f"VENV={venv}", target],
                                      capture_output=True, text=True, check=True).stdout
               for target in ("run", "test", "bench")}
    assert "-r requirements.txt" in planned["run"] and "requirements-test.txt" not in planned["run"]
    assert "-r requirements-test.txt" in planned["test"] and "-r requirements-test.txt" in planned["bench"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_bench_installs_the_browser_its_page_load_bench_drives(tmp_path):
    # bench_render.py drives Chromium; on a fresh machine `make bench` must fetch it as `make test` does.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".requirements-installed").touch()
    planned = subprocess.run(["make", "-n", "-C", str(REPO), f"VENV={venv}", "bench"],
                             capture_output=True, text=True, check=True).stdout
    assert "bin/ensure-browser" in planned


def test_every_setting_read_from_the_environment_is_in_the_configuration_page():
    settings = (REPO / "openprogram_web" / "settings.py").read_text()
    names = set(re.findall(r'environ(?:\.get)?[\[(]"([A-Z_]+)"', settings))
    names |= set(re.findall(r'env_(?:bool|list)\("([A-Z_]+)"', settings))
    for module in [*(REPO / "runtime").rglob("*.py"), *(REPO / "dag").rglob("*.py")]:  # the runtime's own
        names |= set(re.findall(r'"(OPENPROGRAM_[A-Z_]+)"', module.read_text()))
    page = (REPO / "docs" / "configuration.md").read_text()
    assert names and not {name for name in names if f"`{name}`" not in page}


def test_stop_bench_leaves_the_users_var_dir_and_no_scratch_behind(tmp_path):
    mine, scratch_root = tmp_path / "my-var", tmp_path / "tmp"
    mine.mkdir()
    scratch_root.mkdir()
    env = {"PATH": "/usr/bin:/bin", "BENCH_STOP_TRIALS": "1", "OPENPROGRAM_VAR_DIR": str(mine),
           "TMPDIR": str(scratch_root), "LOG_LEVEL": "WARNING"}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "bench_stop.py")], env=env, cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert list(mine.iterdir()) == [] and list(scratch_root.iterdir()) == []


def test_every_manage_py_command_the_docs_and_messages_name_exists():
    from django.core.management import get_commands

    texts = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "bench").rglob("*.py"),
             *(REPO / "dag").rglob("*.py")]
    named = {(path.name, name) for path in texts
             for name in re.findall(r"manage\.py ([a-z_]+)", path.read_text(encoding="utf-8"))}
    assert named and not {(where, name) for where, name in named if name not in get_commands()}
