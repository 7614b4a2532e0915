"""The plain scripted agent of the agents benchmark: the fakes' work through the shell-command protocol.

Run as ``python plain_agent.py`` for either role: it does what ``fake_cli.py`` does for its role
and turn (the same file written, the same report) and writes the report to ``GUARDKIT_REPORT_FILE``,
with no CLI output to read. The benchmark sets the two side by side.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fake_cli

if __name__ == "__main__":
    report = fake_cli._work(os.environ["GUARDKIT_ROLE"], int(os.environ["GUARDKIT_TURN"]))
    Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps(report))
