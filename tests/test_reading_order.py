"""Reading order = import order: the notebooks are read in the order of their file names (the table "Reading order"
of nbs/docs_reading_order.ipynb, docs/reading_order.md, lists them in that order), and no notebook's module imports the module of a later notebook."""
import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
PKG = ROOT / "pfwcp_nb"


def notebook_modules(nbs=NBS) -> dict:
    "{notebook stem: module name} for every notebook with `#| default_exp`, in reading (file-name) order."
    out = {}
    for p in sorted(nbs.glob("[0-9]*.ipynb")):
        src = "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code")
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", src, re.M)
        if m:
            out[p.stem] = m.group(1)
    return out


def module_path(mod: str, pkg=PKG) -> Path:
    "The file of module `mod` (dotted under the package: 'pfwcp', 'federation.server')."
    return pkg.joinpath(*mod.split(".")).with_suffix(".py")


def package_imports(path: Path, mod: str | None = None, pkg=PKG) -> set:
    """Modules of the package (dotted names under it) that module `mod` (file `path`) imports: `from .x import`,
    `from ..x import` in a subpackage, `from pfwcp_nb.x import`, `import pfwcp_nb.x`."""
    parts = (mod or path.stem).split(".")[:-1]                       # the importing module's subpackage
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level >= 1:
                base = parts[:len(parts) - node.level + 1]
                if node.module:
                    found.add(".".join(base + node.module.split(".")))
                else:                                               # `from . import x`
                    found |= {".".join(base + [a.name]) for a in node.names
                              if module_path(".".join(base + [a.name]), pkg).exists()}
            elif node.module and node.module.startswith("pfwcp_nb."):
                found.add(node.module[len("pfwcp_nb."):])
            elif node.module == "pfwcp_nb":                         # `from pfwcp_nb import x`
                found |= {a.name for a in node.names if module_path(a.name, pkg).exists()}
        elif isinstance(node, ast.Import):
            found |= {a.name[len("pfwcp_nb."):] for a in node.names if a.name.startswith("pfwcp_nb.")}
    return found


def backward_imports(nbs=NBS, pkg=PKG) -> list:
    "(notebook, module, imported module, its notebook) for every import of a later notebook's module."
    mods = notebook_modules(nbs)
    rank = {m: i for i, m in enumerate(mods.values())}
    nb_of = {m: nb for nb, m in mods.items()}
    bad = []
    for nb, mod in mods.items():
        for imp in sorted(package_imports(module_path(mod, pkg), mod, pkg)):
            if imp in rank and rank[imp] > rank[mod]:
                bad.append((nb, mod, imp, nb_of[imp]))
    return bad


def test_every_module_has_one_notebook():
    mods = notebook_modules()
    assert len(set(mods.values())) == len(mods), "two notebooks export the same module"
    exported = {".".join(p.relative_to(PKG).with_suffix("").parts) for p in PKG.rglob("*.py")
                if p.stem not in ("__init__", "_modidx")}
    assert exported == set(mods.values()), exported ^ set(mods.values())


def test_no_module_imports_a_later_notebooks_module():
    bad = backward_imports()
    assert not bad, "\n".join(f"{nb} ({m}) imports {i}, taught later in {inb}: renumber or move" for nb, m, i, inb in bad)


def test_index_reading_order_table_is_the_file_order():
    cells = json.loads((NBS / "docs_reading_order.ipynb").read_text())["cells"]
    table = next("".join(c["source"]) for c in cells if "".join(c["source"]).startswith("## Reading order"))
    rows = re.findall(r"^\| `([0-9]\w*)` \| `pfwcp_nb\.([\w.]+)`", table, re.M)
    assert rows == list(notebook_modules().items())



def test_the_check_fails_on_a_backward_import(tmp_path):
    "A planted import of a later notebook's module is found."
    nbs, pkg = tmp_path / "nbs", tmp_path / "pkg"
    nbs.mkdir(), pkg.mkdir()
    for stem, mod, src in [("00_a", "a", "from .b import f\n"), ("01_b", "b", "def f(): pass\n")]:
        cell = {"cell_type": "code", "source": [f"#| default_exp {mod}"], "metadata": {}, "outputs": []}
        (nbs / f"{stem}.ipynb").write_text(json.dumps({"cells": [cell]}))
        (pkg / f"{mod}.py").write_text(src)
    assert backward_imports(nbs, pkg) == [("00_a", "a", "b", "01_b")]
    (pkg / "a.py").write_text("import numpy\n")
    assert backward_imports(nbs, pkg) == []


def test_the_check_sees_relative_imports_in_a_subpackage(tmp_path):
    "A subpackage module's `from ..x import` and `from .y import` are found under their dotted names."
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text("from ..pfwcp import f\nfrom .protocol import g\nfrom . import h\n")
    (tmp_path / "sub" / "h.py").write_text("")
    assert package_imports(tmp_path / "sub" / "m.py", "sub.m", tmp_path) == {"pfwcp", "sub.protocol", "sub.h"}


def test_oneshot_message_lives_with_ospfwcp():
    from pfwcp_nb import oneshot, pfwcp
    assert oneshot.OneShotMessage.__module__ == "pfwcp_nb.oneshot"
    assert "OneShotMessage" not in pfwcp.__all__ and not hasattr(pfwcp, "OneShotMessage")
    assert pfwcp.AgentCalibration.oneshot_message.__module__ == "pfwcp_nb.oneshot"   # grown there by @patch
