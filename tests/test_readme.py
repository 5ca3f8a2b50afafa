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
    """The README's two commands (set up and run the main job; the tests) are what CI runs."""
    text = README.read_text()
    assert re.search(r"^\./quickstart( +#.*)?$", text, re.M), "README: no ./quickstart line"
    assert re.search(r"^\./quickstart test( +#.*)?$", text, re.M), "README: no ./quickstart test line"
    repo = README.parent
    ci = (repo / ".ci" / "run").read_text()
    assert re.search(r"^(exec )?\./quickstart test$", ci, re.M), ci
    quickstart = (repo / "quickstart").read_text()
    assert '-m pytest -q "$@"' in quickstart and '/bin/tilesim" sweep "$@"' in quickstart
    assert 'pip install -q -e ".[test]"' in quickstart and "(3, 11)" in quickstart
