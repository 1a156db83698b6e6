"""A property-based fuzz run of the whole API from its own /openapi.json (schemathesis).

No 5xx, every response's code, content type and body as documented. Bounded
for CI: SWARMKIT_FUZZ_SECONDS (default 20) and SWARMKIT_FUZZ_EXAMPLES (default
25 per operation and phase); set them higher for a longer hunt.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Cli, write_flow
from .serve_helpers import Served, token_file


@pytest.mark.timeout(900)
def test_the_api_survives_a_fuzz_run_from_its_own_schema(sqlite_url: str, workspace: Path, tmp_path: Path):
    flows = tmp_path / "flows"
    flows.mkdir()
    write_flow(flows, "quick", 'name = "quick"\n[[agents]]\nname = "a"\ncommand = "true"\n')
    seconds = os.environ.get("SWARMKIT_FUZZ_SECONDS", "20")
    examples = os.environ.get("SWARMKIT_FUZZ_EXAMPLES", "25")
    s = Served(Cli(sqlite_url, workspace), "--flows", str(flows), "--tokens", str(token_file(tmp_path)))
    try:
        st = Path(sys.executable).parent / "st"
        proc = subprocess.run(
            [str(st), "run", f"{s.url}/openapi.json", "--checks",
             "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
             "--max-time", seconds, "-n", examples, "--seed", "11", "-w", "1", "--no-color",
             "--header", "Authorization: Bearer ops-secret-0123456789abcdef", "--request-timeout", "20"],
            cwd=tmp_path, capture_output=True, text=True, timeout=int(float(seconds)) * 3 + 120,
        )
        out = proc.stdout + proc.stderr
        counts = re.search(r"(\d+) generated, (\d+) passed", out)
        print(f"fuzz: {counts.group(0) if counts else 'no counts'} in at most {seconds}s")
        assert proc.returncode == 0 and counts and counts.group(1) == counts.group(2), out[-6000:]
        assert "Traceback" not in s.output()
    finally:
        s.stop()
