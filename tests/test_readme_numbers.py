"""Numbers quoted by README.md, docs/*.md (and their notebooks), results/**/README.md and studies/**/README.md are
regenerated from the files of results/
(tools/make_readme.py: generated blocks and inline spans) and must equal what is written; prose outside those
regions carries no measured number."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MR = _load("make_readme")


@pytest.mark.slow
def test_quoted_numbers_equal_their_files():
    "The check itself: what `python tools/make_readme.py --check` reports."
    bad = MR.out_of_date()
    assert not bad, f"quoted numbers differ from results/ in {bad}: run python tools/make_readme.py"


# every page that quotes numbers: the README, the docs pages, the results index and every study's README
READMES = ["README.md", "results/README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")) + sorted(
    str(p.relative_to(ROOT)) for p in [*(ROOT / "results").glob("*/README.md"), *(ROOT / "studies").glob("*/README.md")])
PLANT = ROOT / "studies" / "paper_grid" / "README.md"     # a page with both kinds of regions
WITH_REGIONS = [f for f in READMES if MR.quoted((ROOT / f).read_text())]


@pytest.mark.slow
@pytest.mark.parametrize("fname", WITH_REGIONS)
def test_every_region_equals_its_recomputed_value(fname):
    "Region by region, so that a failure names the command or expression whose number drifted."
    text = (ROOT / fname).read_text()
    regions = MR.quoted(text)
    assert regions, f"{fname} quotes no generated number"
    for src, body in regions:
        want = (MR.run_command(src).strip("\n") + "\n") if src in {m["cmd"] for m in MR.BLOCK.finditer(text)} else MR.eval_span(src)
        assert body == want, f"{fname}: `{src}` gives\n{want}\nbut the file says\n{body}"


def _plant(text: str, pattern: str) -> str:
    "Change the first number of the first region matching `pattern` (7 -> 8, others -> 7)."
    m = next(m for m in pattern.finditer(text) if re.search(r"\d", m["body"]))
    body = re.sub(r"\d", lambda d: "8" if d.group() == "7" else "7", m["body"], count=1)
    return text[:m.start("body")] + body + text[m.end("body"):]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["BLOCK", "SPAN"])
def test_a_planted_wrong_number_is_caught(kind):
    text = PLANT.read_text()
    planted = _plant(text, getattr(MR, kind))
    assert planted != text
    assert MR.fill(planted) == MR.fill(text) != planted


@pytest.mark.slow
def test_check_exits_1_on_a_planted_number(tmp_path):
    "`make_readme.py --check` on a copy of the tree whose studies/paper_grid/README.md quotes one wrong number."
    import shutil
    for d in ("tools", "scripts", "studies", "results", "nbs", "pfwcp_nb", "docs"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("*.png", "__pycache__"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    run = lambda: subprocess.run([sys.executable, "tools/make_readme.py", "--check"], cwd=tmp_path, capture_output=True, text=True)
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    f = tmp_path / PLANT.relative_to(ROOT)
    f.write_text(_plant(f.read_text(), MR.SPAN))
    r = run()
    assert r.returncode == 1 and "studies/paper_grid/README.md" in r.stdout, r.stdout + r.stderr


def test_a_missing_file_is_named():
    with pytest.raises(FileNotFoundError, match="results/nowhere.csv"):
        MR.eval_span('pct("nowhere.csv", "MC", method="PFWCP")')
    with pytest.raises(ValueError, match="no row"):
        MR.eval_span('pct("severe/results.csv", "MC", method="no-such-method")')


def test_clopper_pearson_of_500_of_500():
    lo, hi = MR.facts.clopper_pearson(500, 500)
    assert hi == 1.0 and abs(lo - 0.025 ** (1 / 500)) < 1e-12            # 99.26 %: the exact 95 % lower bound
    lo, hi = MR.facts.clopper_pearson(0, 10)
    assert lo == 0.0 and abs(hi - (1 - 0.025 ** (1 / 10))) < 1e-12


# Measured numbers (a decimal, a percentage, seconds) outside the generated regions, code and formulas. The sections
# listed in UNCHECKED still quote typed-in numbers (to convert; each helper's new section should use regions).
NUMBER = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])|\b\d+(?:\.\d+)? ?(?:%|s\b|min\b)")
ALLOWED = {"0.1", "90 %", "95 %"}   # not measurements: α = δ = 0.1, the 1 − α target, the intervals' level
UNCHECKED = {}
# study READMEs whose typed-in tables are not converted yet (their numbers are copied from the files beside them)
UNCHECKED_FILES = {"studies/ccc_vs_mc/README.md"}


def _bare_numbers(text: str) -> list[str]:
    text = MR.BLOCK.sub("", text)
    text = MR.SPAN.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"^ {4}.*$", "", text, flags=re.M)            # indented code: the outputs of the README's snippets
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"(?i)\b(python ≥|python >=|flwr|flower|torch|ray|version) \d+(\.\d+)*", "", text)   # versions
    text = re.sub(r"\b\d+ ?% quantile", "", text)                                          # a quantile's level
    return [n for n in NUMBER.findall(text) if n not in ALLOWED]


def _sections(text: str):
    parts = re.split(r"^(## .*)$", text, flags=re.M)
    yield "", parts[0]
    for i in range(1, len(parts), 2):
        yield parts[i], parts[i + 1]


@pytest.mark.parametrize("fname", [f for f in READMES if f not in UNCHECKED_FILES])
def test_no_typed_in_numbers(fname):
    bad = {}
    for head, body in _sections((ROOT / fname).read_text()):
        if head in UNCHECKED.get(fname, ()):
            continue
        found = _bare_numbers(body)
        if found:
            bad[head or "(top)"] = found
    assert not bad, f"{fname}: numbers typed in outside generated regions (use tools/make_readme.py's regions): {bad}"


def test_every_results_folder_is_in_the_index():
    "results/README.md's table 'What is here, and which command made it' names every folder of results/."
    text = (ROOT / "results" / "README.md").read_text()
    m = re.search(r"^## What is here.*?$(.*?)^## ", text, re.S | re.M)
    assert m, "results/README.md lost its index section '## What is here, and which command made it'"
    folders = sorted(p.name for p in (ROOT / "results").iterdir() if p.is_dir())
    missing = [f for f in folders if f"`{f}/`" not in m.group(1)]
    assert not missing, f"results/ folders without a row in the index of results/README.md: {missing}"
