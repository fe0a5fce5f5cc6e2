"""Small helpers to edit notebook cells by id (used while developing; cell sources stay lists of lines)."""
import json
import uuid


def load(path):
    return json.load(open(path))


def save(nb, path):
    with open(path, "w") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)
        f.write("\n")


def _lines(text):
    return text.splitlines(keepends=True)


def cell(nb, cid):
    for c in nb["cells"]:
        if c.get("id") == cid:
            return c
    raise KeyError(cid)


def replace(nb, cid, old, new, count=1):
    c = cell(nb, cid)
    s = "".join(c["source"])
    if s.count(old) != count:
        raise ValueError(f"cell {cid}: {s.count(old)} matches of {old[:60]!r}")
    c["source"] = _lines(s.replace(old, new))


def set_source(nb, cid, text):
    cell(nb, cid)["source"] = _lines(text)


def new_cell(kind, text, cid=None):
    c = {"cell_type": kind, "id": cid or uuid.uuid4().hex[:8], "metadata": {}, "source": _lines(text)}
    if kind == "code":
        c.update(execution_count=None, outputs=[])
    return c


def insert_after(nb, cid, cells):
    i = [c.get("id") for c in nb["cells"]].index(cid)
    nb["cells"][i + 1:i + 1] = cells


def delete(nb, cid):
    nb["cells"] = [c for c in nb["cells"] if c.get("id") != cid]
