"""The README's Python snippet runs as written, so that it stays true."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def python_snippet():
    text = README.read_text()
    section = text.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section holds one Python snippet"
    return blocks[0]


def test_readme_python_snippet_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the files it writes (a heatmap)
    exec(compile(python_snippet(), str(README), "exec"), {})


def test_pictures_exist():
    # Every picture the README and docs/python.md show is in the repository.
    root = README.parent
    for page in (README, root / "docs" / "python.md"):
        links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text())
        assert links, page
        for link in links:
            path = page.parent / link
            assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", link
