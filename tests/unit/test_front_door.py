"""The front door: the Makefile's setup step."""
import shutil
import subprocess
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
