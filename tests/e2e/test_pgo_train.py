"""scripts/build-pgo's training workload (scripts/pgo-train.py) against a real `portico demo`.

The profile-guided build is only as good as what it was trained on: if a mapping or a tool
changed so that the workload's calls failed, the profile would be trained on error paths. The
driver (scripts/soak's client and rounds, plus `ask_business` and bad input) exits non-zero on
an unexpected error or a tool that never succeeded; this test runs it for one second of load
and checks what it did.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

DRIVER = Path(__file__).resolve().parents[2] / "scripts" / "pgo-train.py"


def test_the_training_workload_exercises_every_demo_flow(mcp_url: str) -> None:
    port = urlparse(mcp_url).port
    assert port, mcp_url
    run = subprocess.run(
        [sys.executable, str(DRIVER), str(port), "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"pgo-train failed:\n{run.stdout}\n{run.stderr}"
    line = next(l for l in run.stderr.splitlines() if l.startswith("pgo-train: {"))
    done = json.loads(line.removeprefix("pgo-train: "))
    # 28 rounds in each of the two eras: every tool succeeded in every round, nothing failed.
    assert done["tools"] == 14, done
    assert done["errors"] == 0, done
    assert set(done["succeeded"].values()) == {56}, done
    assert done["load"] > 0, done
