"""The READMEs' five lines, from a key to the first event, run against a live server."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("readme", [ROOT / "README.md", ROOT / "clients/python/README.md"])
def test_the_readme_example_runs(readme, server_url, api_key, capsys):
    text = readme.read_text()
    example = re.search(r"```python\n(from switchboard_client import Client\n.*?)```", text, re.S)
    assert example is not None
    code = example[1]
    assert len([line for line in code.splitlines() if line]) == 5
    exec(code.replace("http://localhost:8000", server_url), {"KEY": api_key})
    assert capsys.readouterr().out == "{'text': 'Hi'}\n"
