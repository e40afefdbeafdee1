"""scripts/install.sh keeps the torch a user installed where the build is
written for it (2.11 and newer), installs 2.13.0 only where there is none
(or the release RINGREDUCE_TORCH names), and stops, saying how to go on,
rather than replacing an older one (scripts/torch_plan.sh)."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = os.path.join(ROOT, "scripts", "torch_plan.sh")
INSTALL = os.path.join(ROOT, "scripts", "install.sh")


def apt_packages():
    """install.sh's APT_PACKAGES, as it lists them (python3-venv is added
    only where PYTHON is unset)."""
    with open(INSTALL) as f:
        return re.search(r"^APT_PACKAGES=\(([^)]*)\)", f.read(), re.M).group(1).split()


def plan(installed, wanted=None):
    env = {k: v for k, v in os.environ.items() if k != "RINGREDUCE_TORCH"}
    if wanted is not None:
        env["RINGREDUCE_TORCH"] = wanted
    out = subprocess.run(["bash", "-c", f'. "{PLAN}"; ringreduce_torch_plan "$1"', "plan",
                          installed], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("installed", ["2.13.0+cpu", "2.13.0", "2.14.1", "2.14.1+cu130",
                                       "2.11.0", "2.12.1"])
def test_a_torch_the_build_is_written_for_is_kept(installed):
    assert plan(installed) == "keep"


def test_none_installed_gets_the_default_release():
    assert plan("") == "install 2.13.0"


def test_a_newer_torch_is_kept_and_called_untested():
    assert plan("2.15.0") == "keep (newer than 2.14.1, the newest this build was tested with)"
    assert plan("2.14.10").startswith("keep (newer")


@pytest.mark.parametrize("installed", ["2.10.0", "2.9.1+cpu", "1.13.1"])
def test_an_older_torch_is_left_alone_and_the_way_on_named(installed):
    answer = plan(installed)
    assert answer.startswith(f"refuse torch {installed} is installed, older than 2.11")
    assert "pip install 'torch>=2.11'" in answer
    assert "RINGREDUCE_TORCH=2.13.0 bash scripts/install.sh" in answer


def test_an_explicit_release_is_installed_unless_it_is_there():
    assert plan("2.14.1", wanted="2.13.0") == "install 2.13.0"
    assert plan("2.13.0+cpu", wanted="2.13.0") == "keep"
    assert plan("", wanted="2.14.1") == "install 2.14.1"
    assert plan("2.9.0", wanted="2.13.0") == "install 2.13.0"


def test_install_sh_stops_before_touching_an_older_torch(tmp_path):
    # install.sh installs missing Debian packages first: not from a test.
    missing = subprocess.run(["dpkg", "-s", *apt_packages()], capture_output=True).returncode != 0
    if missing:
        pytest.skip("install.sh's Debian packages are not all installed: it would apt-get them")
    # A Python whose torch is 2.9.0 and that records every other call it
    # gets: install.sh must stop after asking for the version, before pip.
    calls = tmp_path / "calls"
    python = tmp_path / "python"
    python.write_text(f"""#!/bin/sh
if [ "$1" = "-c" ] && [ "$2" = "import torch; print(torch.__version__)" ]; then
  echo 2.9.0; exit 0
fi
echo "$@" >> {calls}
exit 1
""")
    python.chmod(0o755)
    out = subprocess.run(["bash", INSTALL],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHON": str(python)}, cwd=ROOT)
    assert out.returncode == 1
    assert "torch 2.9.0 is installed, older than 2.11" in out.stderr
    assert not calls.exists() or "pip" not in calls.read_text()
