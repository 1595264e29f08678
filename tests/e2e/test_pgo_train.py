"""scripts/build-pgo's training workload (scripts/pgo-train.py) against a real `portico demo`.

The profile-guided build is only as good as what it was trained on: if a mapping or a tool
changed so that the workload's calls failed, the profile would be trained on error paths. The
driver exits non-zero when any part of the workload exercised nothing (no tools listed, no USP
booking made, no UCP session completed, no `ask_business` answer, a failed hot call); this test
runs it for one second of load and checks what it did.
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
    # 28 days in each of the two eras: every flow ran, and each USP/UCP flow completed.
    assert done["tools"] == 13, done
    assert done["bookings"] == 56 and done["sessions"] == 56 and done["asks"] == 56, done
    assert done["load"] > 0, done
