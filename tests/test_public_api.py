"""The public API: ``import autoplace`` is enough for the README's Python example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import autoplace

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return next(b for b in blocks if "import autoplace as ap" in b)


def test_the_readme_example_runs_with_one_import(tmp_path):
    code = readme_example()
    assert [line for line in code.splitlines() if line.startswith(("import", "from"))] == [
        "import autoplace as ap"]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("\n")
    assert float(lines[0]) > 0  # the hand-written placement's simulated latency
    assert "greedy" in out.stdout and (tmp_path / "tune.jsonl").exists()


def test_every_public_name_resolves_and_import_stays_light():
    for name in autoplace.__all__:
        assert getattr(autoplace, name) is not None
    code = ("import sys, autoplace; print(sorted(m for m in ('tvm', 'optuna', 'xgboost') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error():
    try:
        autoplace.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("autoplace.no_such_thing resolved")
