"""Write README.md from nbs/index.ipynb and the long pages docs/NAME.md from nbs/docs_NAME.ipynb (Quarto, and so
`nbdev_readme`, is not available here), and fill the numbers that they, their notebooks, results/**/README.md and
studies/**/README.md quote from the files of `results/`.

Cells marked `#| hide` are dropped and `#|` directive lines removed; the rest is exported with nbconvert's
markdown exporter, outputs included; code cells become ```python blocks, which must run as copied (each on its own,
in a fresh interpreter: tests/test_readme.py executes them).

Quoted numbers are never typed in. Two kinds of marked regions are (re)computed on every run:

* a generated block, whose body is the standard output of a command run from the repository root
  (`python` means this interpreter; the command must exit 0):

      <!-- generated: python studies/paper_grid/summary_table.py results/severe -->
      ...output...
      <!-- /generated -->

* an inline span, whose body is a Python expression over the functions of tools/facts.py (paths relative to
  `results/`):

      <!--= pct("severe/results.csv", "MC", method="PFWCP", guarantee="mc", dataset="gaussian") -->90.13<!--/=-->

`python tools/make_readme.py` rewrites README.md and docs/*.md and fills the regions of their notebooks,
results/**/README.md and studies/**/README.md in place; `--check` changes nothing and exits 1 if any of them is out of date (tests/test_readme_numbers.py runs the
same check). How-to for new sections: /work/notes/README_BLOCKS.md (and the docstring of tools/facts.py).
"""
import copy
import os
import re
import shlex
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import nbformat
from nbconvert import MarkdownExporter

ROOT = Path(__file__).resolve().parents[1]
# nbconvert's templates live under the base interpreter's share/jupyter, which jupyter_core does not search from a
# venv made with --system-site-packages (as in /work/notes/mkwt.sh): add that folder to JUPYTER_PATH
os.environ["JUPYTER_PATH"] = os.pathsep.join([p for p in [os.environ.get("JUPYTER_PATH")] if p] +
                                             [str(Path(sys.base_prefix) / "share" / "jupyter")])
sys.path.insert(0, str(ROOT / "tools"))
import facts  # noqa: E402  (tools/ is not a package)

BLOCK = re.compile(r"(?P<open><!-- generated: (?P<cmd>[^\n]+?) -->\n)(?P<body>.*?)(?P<close><!-- /generated -->)", re.S)
SPAN = re.compile(r"(?P<open><!--= (?P<expr>.+?) -->)(?P<body>.*?)(?P<close><!--/=-->)", re.S)


@lru_cache(maxsize=None)
def run_command(cmd: str) -> str:
    "Standard output of `cmd` run from the repository root; `python` is this interpreter."
    argv = shlex.split(cmd)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"generated block: `{cmd}` exited {r.returncode}:\n{r.stderr[-2000:]}")
    return r.stdout


def eval_span(expr: str) -> str:
    "Value of an inline span's expression over tools/facts.py."
    try:
        v = eval(expr, {"__builtins__": {}, **facts.NAMESPACE})   # facts' functions and a few builtins only (as globals,
                                                                  # so that a generator expression sees them too)
    except Exception as e:
        raise type(e)(f"inline span `{expr}`: {e}") from e
    if not isinstance(v, str):
        raise TypeError(f"inline span `{expr}` gave {type(v).__name__}, not str (use the formatting functions of tools/facts.py)")
    return v


def fill(text: str) -> str:
    "`text` with every generated block and inline span recomputed from the files of results/."
    text = BLOCK.sub(lambda m: m["open"] + run_command(m["cmd"]).strip("\n") + "\n" + m["close"], text)
    return SPAN.sub(lambda m: m["open"] + eval_span(m["expr"]) + m["close"], text)


def quoted(text: str) -> list[tuple[str, str]]:
    "The (source, written body) of every region of `text`, to compare with `fill`."
    return [(m["cmd"], m["body"]) for m in BLOCK.finditer(text)] + [(m["expr"], m["body"]) for m in SPAN.finditer(text)]


def filled_notebook(path: Path) -> nbformat.NotebookNode:
    "The notebook with its markdown cells' regions filled."
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == "markdown":
            c.source = fill(c.source)
    return nb


def pages() -> dict[str, Path]:
    "{generated page: its notebook}: README.md from nbs/index.ipynb, docs/NAME.md from each nbs/docs_NAME.ipynb."
    out = {"README.md": ROOT / "nbs" / "index.ipynb"}
    for nb in sorted((ROOT / "nbs").glob("docs_*.ipynb")):
        out[f"docs/{nb.stem[len('docs_'):]}.md"] = nb
    return out


def page_text(page: str = "README.md") -> str:
    "The markdown of generated `page` (README.md or docs/NAME.md) from its notebook, regions filled."
    src = pages()[page]
    nb = copy.deepcopy(filled_notebook(src))
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
    return (f"<!-- generated from nbs/{src.name} by tools/make_readme.py: edit the notebook, not this file -->\n\n"
            + body.strip() + "\n")


def readme_text() -> str:
    return page_text("README.md")


def filled_files() -> list[Path]:
    "The markdown files whose regions are filled in place: every README.md under results/ and studies/."
    return sorted((ROOT / "results").glob("**/README.md")) + sorted((ROOT / "studies").glob("**/README.md"))


def out_of_date() -> list[str]:
    "Files that `python tools/make_readme.py` would change."
    bad = []
    for page, src in pages().items():
        f = ROOT / page
        if not f.exists() or f.read_text() != page_text(page):
            bad.append(page)
        if nbformat.writes(filled_notebook(src)) != nbformat.writes(nbformat.read(src, as_version=4)):
            bad.append(str(src.relative_to(ROOT)))
    stale = sorted(set(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")) - set(pages()))
    bad += [f"{s} (no notebook nbs/docs_{Path(s).stem}.ipynb: delete it)" for s in stale]
    for f in filled_files():
        t = f.read_text()
        if fill(t) != t:
            bad.append(str(f.relative_to(ROOT)))
    return bad


def write_all() -> list[Path]:
    "Fill everything in place; the files written."
    written = []
    for src in pages().values():
        nb = filled_notebook(src)
        if nbformat.writes(nb) != nbformat.writes(nbformat.read(src, as_version=4)):
            nbformat.write(nb, src)
            written.append(src)
    for f in filled_files():
        t = f.read_text()
        if fill(t) != t:
            f.write_text(fill(t))
            written.append(f)
    (ROOT / "docs").mkdir(exist_ok=True)
    for page in pages():
        (ROOT / page).write_text(page_text(page))
    return written + [ROOT / page for page in pages()]


if __name__ == "__main__":
    if "--check" in sys.argv:
        bad = out_of_date()
        print("README.md, docs/*.md, their notebooks, results/**/README.md and studies/**/README.md are in sync with results/" if not bad
              else "out of date (run python tools/make_readme.py): " + ", ".join(bad))
        sys.exit(1 if bad else 0)
    for p in write_all():
        print(f"wrote {p.relative_to(ROOT)}")
