"""Every module of the package stays at most 600 lines: one concern per module, split along a seam when it grows."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pfwcp_nb"
MAX_LINES = 600
MODULES = sorted(p for p in PKG.rglob("*.py") if p.name != "_modidx.py")   # _modidx.py: nbdev's generated index


def too_long(paths, max_lines: int = MAX_LINES) -> list:
    "(path, line count) of every file in `paths` over `max_lines` lines."
    counts = ((p, len(p.read_text(encoding="utf-8").splitlines())) for p in paths)
    return [(p, n) for p, n in counts if n > max_lines]


def test_the_package_has_modules():
    assert len(MODULES) > 10 and PKG / "coverage.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_module_is_at_most_600_lines(path):
    for p, n in too_long([path]):
        pytest.fail(f"{p.relative_to(ROOT)} has {n} lines (> {MAX_LINES}): split its notebook "
                    f"(nbs/, the `#| default_exp` of this module) into two along a seam, one concern each")


def test_the_check_finds_a_long_file(tmp_path):
    "A planted 601-line file is found, with its count; a 600-line one is not."
    long_, ok = tmp_path / "long.py", tmp_path / "ok.py"
    long_.write_text("x = 1\n" * 601)
    ok.write_text("x = 1\n" * 600)
    assert too_long([long_, ok]) == [(long_, 601)]
