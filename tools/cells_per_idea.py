"""The nbdev rhythm of the notebooks: one idea per exported cell, then its check.

    python tools/cells_per_idea.py [NB ...] [--list] [--per-notebook]

For every `#| export` / `#| exports` cell of nbs/*.ipynb (or the notebooks named) it measures
- the cell's length: its non-blank lines, `#|` directives left out;
- its ideas: top-level `def` / `class` statements (a method grown with fastcore's `@patch` is its own idea);
- whether a check follows it: a code cell between it and the next exported cell that calls `test_*`, `assert`s,
  or draws (`plt.`, `.plot(`);
- unchecked runs: three or more exported cells in a row with no check after any of them.
A cell over `MAX_LINES` lines is "long"; it is allowed when it says why in a comment line `# long cell: <reason>`.
Prints the totals (and each notebook's with `--per-notebook`); `--list` names the long and many-idea cells.
Exit 0; 2 on a notebook that does not exist. `tests/test_rhythm.py` holds the limits."""
import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPORT = re.compile(r"^#\|\s*exports?\s*$", re.M)
CHECK = re.compile(r"\btest_\w+\(|^\s*assert\b|\bplt\.|\.plot\(", re.M)
REASON = re.compile(r"^\s*# long cell: \S", re.M)
MAX_LINES = 40


@dataclass
class Cell:
    "One exported cell of a notebook and what follows it."
    notebook: str  # the notebook's file name
    id: str  # the cell's id
    lines: int  # non-blank lines, `#|` directives left out
    ideas: int  # top-level def/class statements
    checked: bool  # a check runs before the next exported cell
    reason: bool  # says why it is long (`# long cell: ...`)


def cells(nb: Path) -> list:
    "The exported cells of notebook `nb`, each with its length, ideas and whether a check follows it."
    out, src_cells = [], [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
    for c in src_cells:
        src = "".join(c["source"])
        if EXPORT.search(src):
            body = [l for l in src.split("\n") if l.strip() and not l.lstrip().startswith("#|")]
            tree = ast.parse("\n".join(l for l in src.split("\n") if not l.lstrip().startswith(("%", "!"))))
            n = sum(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for s in tree.body)
            out.append(Cell(nb.name, c.get("id", "?"), len(body), n, False, bool(REASON.search(src))))
        elif out and CHECK.search(src):
            out[-1].checked = True
    return out


def unchecked_runs(cs: list, run: int = 3) -> int:
    "How many of the cells `cs` (one notebook's, in order) sit in runs of `run` or more unchecked exported cells."
    total = streak = 0
    for c in cs + [None]:
        if c is not None and not c.checked:
            streak += 1
            continue
        total += streak if streak >= run else 0
        streak = 0
    return total


def summary(cs: list) -> dict:
    "Totals of the cells `cs`: how many, mean length, long (and long without a reason), many ideas, checked share."
    n = max(len(cs), 1)
    return dict(cells=len(cs), mean_lines=sum(c.lines for c in cs) / n,
                long=sum(c.lines > MAX_LINES for c in cs),
                long_unexplained=sum(c.lines > MAX_LINES and not c.reason for c in cs),
                many_ideas=sum(c.ideas > 1 for c in cs), checked=sum(c.checked for c in cs) / n)


def line(name: str, s: dict, runs: int) -> str:
    "One printed line of totals."
    return (f"{name}: {s['cells']} exported cells, {s['mean_lines']:.1f} lines on average, {s['long']} over "
            f"{MAX_LINES} ({s['long_unexplained']} without a reason), {s['many_ideas']} with more than one idea, "
            f"{100 * s['checked']:.0f} % followed by a check, {runs} in unchecked runs of three or more")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="notebooks (default: nbs/[0-9]*.ipynb)")
    p.add_argument("--list", action="store_true", help="name the long cells and those with more than one idea")
    p.add_argument("--per-notebook", action="store_true", help="one line of totals per notebook")
    a = p.parse_args(argv)
    nbs = a.notebooks or sorted((ROOT / "nbs").glob("[0-9]*.ipynb"))
    for nb in nbs:
        if not nb.is_file():
            p.error(f"{nb} does not exist")
    per = {nb.name: cells(nb) for nb in nbs}
    for name, cs in per.items():
        if a.per_notebook:
            print(line(name, summary(cs), unchecked_runs(cs)))
        for c in cs if a.list else []:
            if c.lines > MAX_LINES or c.ideas > 1:
                print(f"  {name} #{c.id}: {c.lines} lines, {c.ideas} defs/classes{'' if c.reason else ''}")
    every = [c for cs in per.values() for c in cs]
    print(line("all", summary(every), sum(unchecked_runs(cs) for cs in per.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
