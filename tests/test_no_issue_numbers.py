"""User-facing text names notebooks, studies and files, never the project's issue numbers: a reader of the package has
no issue tracker to open. Every tracked text file of nbs/, docs/, tests/, scripts/, tools/, bench/, .ci/, the study
sources (studies/**: .md .py .sh .ipynb), the results' prose (results/**: .md .txt) and README.md is searched.
Stored run records (results/**/*.jsonl, *.csv, *.csv.gz, studies' .json/.txt outputs) are left as they were written.

The pattern is built from pieces so that this file does not match it."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORD = "iss" + "ue"
PATTERN = re.compile(r"\b" + WORD + r"s? ?#?\d+", re.I)
IDENT = re.compile(WORD + r"[_-]?\d", re.I)       # in names: test_x_<word>31.py, def test_<word>28_..., <word>-11
EVERY_FILE = ("nbs", "docs", "tests", "scripts", "tools", "bench", ".ci")      # every tracked file is text here
BY_SUFFIX = {"studies": (".md", ".py", ".sh", ".ipynb"), "results": (".md", ".txt")}
SINGLE = ("README.md", "pytest.ini")
# Files the lead edits (README.md is generated from nbs/index.ipynb) or whose study is running (studies/value/):
# still citing issue numbers when this test was written. Remove a path once it is clean
# (test_lead_todo_is_still_needed fails until you do).
LEAD_TODO: list[str] = []


def tracked() -> list[str]:
    "The tracked files searched, relative to the repository root."
    r = subprocess.run(["git", "ls-files", "-z", "--", *EVERY_FILE, *BY_SUFFIX, *SINGLE], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"not a git checkout ({r.stderr.strip()[:200]}): the tracked files are unknown")
    out = []
    for f in filter(None, r.stdout.split("\0")):
        top = f.split("/")[0]
        if top in BY_SUFFIX and not f.endswith(BY_SUFFIX[top]):
            continue
        out.append(f)
    return out


def hits(path: str) -> list[str]:
    "`path:line: text` for each line of `path` that cites an issue number."
    text = (ROOT / path).read_text(encoding="utf-8")
    return [f"{path}:{i}: {l.strip()[:160]}" for i, l in enumerate(text.splitlines(), 1) if PATTERN.search(l) or IDENT.search(l)]


def test_the_pattern_catches_each_way_of_citing_and_nothing_else():
    for cited in (f"{WORD} 27", f"({WORD} 29 item 7)", f"{WORD.title()} #31", f"{WORD}s 18, 19 and 30", f"{WORD}#12"):
        assert PATTERN.search(cited), cited
    for name in (f"tests/test_redteam_{WORD}31.py", f"def test_{WORD}28_k101", f"the {WORD}-11 grid"):
        assert IDENT.search(name) and not PATTERN.search(name), name
    for clean in (f"t{WORD} 5", f"the {WORD}'s target", f"{WORD}r 3", "notebook `02c_trust`", f"{WORD}d 4 warnings"):
        assert not PATTERN.search(clean) and not IDENT.search(clean), clean


def test_this_file_does_not_match_its_own_pattern():
    assert not hits("tests/test_no_issue_numbers.py")


def test_no_tracked_text_cites_an_issue_number():
    files = tracked()
    assert "tests/test_no_issue_numbers.py" in files and any(f.startswith("studies/") for f in files), files[:5]
    found = [h for f in files if f not in LEAD_TODO for h in hits(f)]
    assert not found, ("name the notebook, study or file instead of the issue number:\n" + "\n".join(found))


def test_no_tracked_file_is_named_after_an_issue():
    r = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    named = [f for f in r.stdout.split("\0") if IDENT.search(f) or PATTERN.search(f)]
    assert not named, f"rename to say what they hold: {named}"


def test_lead_todo_is_still_needed():
    clean = [f for f in LEAD_TODO if (ROOT / f).is_file() and not hits(f)]
    assert not clean, f"no issue numbers left in {clean}: remove them from LEAD_TODO"
