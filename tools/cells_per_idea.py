"""How many exported cells define more than one function or class (issue 21 item 8: one idea per exported cell).

    python tools/cells_per_idea.py [NB ...] [--list]

Counts the top-level `def` / `class` statements of every `#| export` / `#| exports` cell of nbs/*.ipynb (or the
notebooks named) and prints the share of exported cells with more than one; `--list` names those cells. A function
grown onto a class with fastcore's `@patch` counts as its own idea. Exit 0; 2 on a notebook that does not exist."""
import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPORT = re.compile(r"^#\|\s*exports?\s*$", re.M)


def exported_cells(nb: Path):
    "(cell id, number of top-level def/class) of each exported code cell of `nb`."
    for c in json.loads(nb.read_text())["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] != "code" or not EXPORT.search(src):
            continue
        tree = ast.parse("\n".join(l for l in src.split("\n") if not l.lstrip().startswith(("%", "!"))))
        n = sum(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for s in tree.body)
        yield c.get("id", "?"), n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="notebooks (default: nbs/[0-9]*.ipynb)")
    p.add_argument("--list", action="store_true", help="name the cells with more than one def/class")
    a = p.parse_args(argv)
    nbs = a.notebooks or sorted((ROOT / "nbs").glob("[0-9]*.ipynb"))
    for nb in nbs:
        if not nb.is_file():
            p.error(f"{nb} does not exist")
    total = many = 0
    for nb in nbs:
        for cid, n in exported_cells(nb):
            total += 1
            if n > 1:
                many += 1
                if a.list:
                    print(f"{nb.name} #{cid}: {n} defs/classes")
    print(f"{many} of {total} exported cells define more than one function or class ({100 * many / max(total, 1):.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
