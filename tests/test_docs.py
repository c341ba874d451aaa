"""Docs must match the code: the generated files, the README example, and the one list of open
limitations that every "not yet" in the docs links to."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tensorplay.tools import regen

ROOT = Path(__file__).resolve().parents[1]


def test_dialect_reference_is_up_to_date():
    current = (ROOT / "docs" / "dialect.md").read_text(encoding="utf-8")
    assert current == regen.render("docs/dialect.md"), (
        "docs/dialect.md is stale; regenerate it with: python -m tensorplay.tools.regen")


def test_dialect_reference_lists_every_registered_op():
    from tensorplay.dialects.tp import all_ops

    text = regen.render("docs/dialect.md")
    for op in all_ops():
        assert f"### `{op.name}`" in text
        assert op.summary, f"{op.name} has no one-line doc"


def test_one_command_checks_and_rewrites_every_generated_file(tmp_path):
    assert set(regen.GENERATED) == {"docs/dialect.md", "tests/lit/roundtrip.mlir", "docs/coverage.md"}
    for rel in regen.GENERATED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "docs" / "dialect.md").write_text("old\n")  # stale; the lit file is missing
    check = [sys.executable, "-m", "tensorplay.tools.regen", "--check", "--root", str(tmp_path)]
    proc = subprocess.run(check, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"{rel} is stale; run: python -m tensorplay.tools.regen"
                                        for rel in regen.GENERATED]
    proc = subprocess.run([sys.executable, "-m", "tensorplay.tools.regen", "--root", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for rel in regen.GENERATED:
        assert (tmp_path / rel).read_text(encoding="utf-8") == regen.render(rel)
        assert not list((tmp_path / rel).parent.glob(".*"))  # no temporary file left behind
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    # the checkout itself is current (what the two tests above check file by file)
    assert subprocess.run(check[:-2], capture_output=True, text=True).returncode == 0


@pytest.mark.iree  # the example compiles, in a subprocess the watch in conftest.py does not see
def test_readme_python_example_runs_and_compiled_matches_eager():
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    # the eager and the compiled print show the same probabilities (printed to 4 decimals)
    eager, compiled = ([float(v) for v in re.findall(r"-?\d+\.\d+", part)]
                       for part in proc.stdout.split("tensor(")[1:3])
    assert len(eager) == len(compiled) == 6, proc.stdout
    assert max(abs(a - b) for a, b in zip(eager, compiled)) <= 1e-4, proc.stdout


# --- open limitations: one list, kept true ---------------------------------------------------------

_YET = re.compile(r"\bnot\b[^.;:]{0,40}\byet\b|\bno\b[^.;:]{0,60}\byet\b|\bnot yet\b|\byet to\b", re.I)
_LINK = re.compile(r"limitations\.md#([a-z0-9-]+)")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _limitations() -> dict[str, str]:
    """Anchor -> text of each entry of docs/limitations.md."""
    text = (ROOT / "docs" / "limitations.md").read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {_slug(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def _exists(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def _blocks(path: Path):
    """(first line number, text) of each paragraph or list item of a markdown page, code
    blocks left out."""
    block, start, fenced = [], 0, False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        new_item = re.match(r"\s*([-*]|\d+\.) ", line) is not None
        if fenced or not line.strip() or new_item or line.startswith("#"):
            if block:
                yield start, " ".join(block)
            block = []
            if fenced or not line.strip():
                continue
        if not block:
            start = n
        block.append(line.strip())
    if block:
        yield start, " ".join(block)


def _user_pages():
    skip = {"limitations.md", "dialect.md"}  # the list itself; the generated op reference
    return [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in skip)


def test_every_not_yet_in_the_docs_links_an_open_limitation():
    entries = _limitations()
    unlinked, dangling = [], []
    for page in _user_pages():
        for line, text in _blocks(page):
            links = _LINK.findall(text)
            dangling += [f"{page.name}:{line}: #{a}" for a in links if a not in entries]
            if _YET.search(text) and not links:
                unlinked.append(f"{page.name}:{line}: {text[:100]}")
    assert not dangling, f"links to entries docs/limitations.md does not have: {dangling}"
    assert not unlinked, ("sentences saying something is not there yet without a link to its entry in "
                          f"docs/limitations.md (add the entry, or drop the sentence if it is there now): {unlinked}")


def test_every_name_an_open_limitation_says_is_absent_is_absent():
    entries = _limitations()
    assert len(entries) >= 5
    present = []
    for anchor, text in entries.items():
        for line in re.findall(r"^Absent: (.+)$", text, flags=re.M):
            for name in re.findall(r"`([\w.]+)`", line):
                if _exists(name):
                    present.append(f"#{anchor}: {name}")
    assert not present, (f"docs/limitations.md lists as missing what exists now: {present}; update the entry "
                         "and the pages linking to it")


def test_the_limitation_checks_catch_a_contradiction(tmp_path):
    # the checks themselves: a name that exists is found, a dotted module path resolves, an
    # unlinked "not yet" sentence is found
    assert _exists("tensorplay.nn.Linear") and _exists("tensorplay.optim.SGD")
    assert not _exists("tensorplay.nn.NoSuchLayer")
    page = tmp_path / "page.md"
    page.write_text("Intro.\n\n- Optimizers are not there yet.\n- Linked, not yet\n  "
                    "([limitations.md](limitations.md#views-are-copies)).\n\n```\nnot yet in code\n```\n")
    blocks = list(_blocks(page))
    assert [bool(_YET.search(t)) and not _LINK.findall(t) for _, t in blocks] == [False, True, False]
    assert _slug("Views are copies") == "views-are-copies"
    assert _slug("Data loading, sorting and device selection") == "data-loading-sorting-and-device-selection"
