"""Write README.md from nbs/index.ipynb (Quarto, and so `nbdev_readme`, is not available here).

Cells marked `#| hide` are dropped and `#|` directive lines removed; the rest is exported with nbconvert's
markdown exporter, outputs included; code cells become ```python blocks, which must run as copied (each on its own,
in a fresh interpreter: tests/test_readme.py executes them). `python tools/make_readme.py --check` exits 1 if
README.md is out of date.
"""
import sys, copy
from pathlib import Path
import nbformat
from nbconvert import MarkdownExporter

ROOT = Path(__file__).resolve().parents[1]


def readme_text() -> str:
    nb = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4)
    nb = copy.deepcopy(nb)
    cells = []
    for c in nb.cells:
        lines = c.source.splitlines()
        if c.cell_type == "code" and any(l.strip().startswith("#| hide") for l in lines):
            continue
        c.source = "\n".join(l for l in lines if not l.strip().startswith("#|")).strip("\n")
        cells.append(c)
    nb.cells = cells
    nb.metadata["language_info"] = {"name": "python"}    # code cells become ```python blocks (tests/test_readme.py runs them)
    body, _ = MarkdownExporter().from_notebook_node(nb)
    return "<!-- generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook, not this file -->\n\n" + body.strip() + "\n"


if __name__ == "__main__":
    text = readme_text()
    path = ROOT / "README.md"
    if "--check" in sys.argv:
        ok = path.exists() and path.read_text() == text
        print("README.md is in sync with nbs/index.ipynb" if ok else "README.md is out of date: run python tools/make_readme.py")
        sys.exit(0 if ok else 1)
    path.write_text(text)
    print(f"wrote {path}")
