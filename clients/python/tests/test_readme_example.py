"""The README's example runs verbatim (pointed at the test cluster)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cluster import UpCluster

EXAMPLE = Path(__file__).parents[1] / "examples" / "readme_example.py"


def test_the_readme_example_runs(cluster: UpCluster) -> None:
    env = dict(os.environ, RAFTLOCK_ENDPOINTS=",".join(cluster.endpoints))
    done = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "holding orders/42 with fencing token" in done.stdout
    assert "still ours: True" in done.stdout
    assert "released; holder now: None" in done.stdout


def test_the_top_level_readme_shows_the_example_verbatim() -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    marker = "<!-- clients/python/examples/readme_example.py -->"
    assert marker in readme, "the README lost its Python example"
    shown = readme.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert shown.strip() == EXAMPLE.read_text().strip()
