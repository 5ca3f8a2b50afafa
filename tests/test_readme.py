"""The README's Python examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()


def test_readme_names_the_two_commands():
    text = README.read_text()
    assert "tilesim sweep" in text and "python3 -m pytest -q" in text
    assert "python3 -m pytest -q" in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
