"""Numbers quoted in prose, read from the files of `results/` (the namespace of the inline spans of make_readme.py).

An inline span in README.md, nbs/index.ipynb or results/**/README.md

    PFWCP's MC is <!--= pct("severe/results.csv", "MC", method="PFWCP", guarantee="mc", dataset="gaussian") -->90.13<!--/=--> %

renders as "PFWCP's MC is 90.13 %"; `python tools/make_readme.py` re-evaluates the expression and rewrites the text
between the markers, and tests/test_readme_numbers.py fails when it differs from what is written. Paths are relative
to `results/`. Every function returns a string. Filters `col=value` must select exactly one row (`value` may be a list
or tuple: the row's value is one of them) for `val`/`pct`; `span`/`lo`/`hi` accept many rows.
"""
import json
import re
from functools import lru_cache
from pathlib import Path

import pandas as pd
from scipy.stats import beta as _beta

RESULTS = Path(__file__).resolve().parents[1] / "results"


@lru_cache(maxsize=None)
def table(path: str) -> pd.DataFrame:
    "The CSV `results/<path>` (cached; do not modify it)."
    f = RESULTS / path
    if not f.exists():
        raise FileNotFoundError(f"results/{path} does not exist (a quoted number must name an existing file)")
    return pd.read_csv(f)


def rows(path: str, **where) -> pd.DataFrame:
    "Rows of `results/<path>` whose column `c` equals `where[c]` (or is in it, for a list/tuple)."
    d = table(path)
    for c, v in where.items():
        if c not in d.columns:
            raise ValueError(f"results/{path} has no column {c!r} (columns: {list(d.columns)})")
        d = d[d[c].isin(v) if isinstance(v, (list, tuple)) else d[c] == v]
    if d.empty:
        raise ValueError(f"no row of results/{path} with {where}")
    return d


def _one(path, col, where):
    d = rows(path, **where)
    if len(d) != 1:
        raise ValueError(f"{len(d)} rows of results/{path} with {where}; add a filter so that one remains")
    return d[col].iloc[0]


def val(path: str, col: str, fmt: str = ".2f", *, scale: float = 1.0, **where) -> str:
    "One cell of a CSV, times `scale`, formatted with `fmt`."
    return format(scale * float(_one(path, col, where)), fmt)


def pct(path: str, col: str, fmt: str | None = None, **where) -> str:
    "One cell as a percentage: 2 decimals for MC-like columns, 1 for CCC-like ones (col starting with 'CCC')."
    return val(path, col, fmt or (".1f" if col.startswith("CCC") else ".2f"), scale=100, **where)


def span(path: str, col: str, fmt: str = ".2f", *, scale: float = 1.0, **where) -> str:
    "min–max of a column over the selected rows ('x' alone when they agree at this precision)."
    d = rows(path, **where)[col].astype(float) * scale
    a, b = format(d.min(), fmt), format(d.max(), fmt)
    return a if a == b else f"{a}–{b}"


def pspan(path: str, col: str, fmt: str | None = None, **where) -> str:
    "`span` in percent (2 decimals, 1 for CCC-like columns)."
    return span(path, col, fmt or (".1f" if col.startswith("CCC") else ".2f"), scale=100, **where)


def total(path: str, col: str, fmt: str = ".1f", **where) -> str:
    "Sum of a column over the selected rows."
    return format(rows(path, **where)[col].astype(float).sum(), fmt)


def jsonl(path: str, key: str, fmt: str = ".1f", *, line: int = 0) -> str:
    "Field `key` of line `line` (0 = first, -1 = last) of a JSON-lines file such as runs.jsonl."
    f = RESULTS / path
    if not f.exists():
        raise FileNotFoundError(f"results/{path} does not exist")
    recs = [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
    v = recs[line][key]
    return format(v, fmt) if isinstance(v, (int, float)) and fmt else str(v)


def jspan(path: str, key: str, fmt: str = ".1f") -> str:
    "min–max of field `key` over the lines of a JSON-lines file."
    f = RESULTS / path
    if not f.exists():
        raise FileNotFoundError(f"results/{path} does not exist")
    v = [json.loads(l)[key] for l in f.read_text().splitlines() if l.strip()]
    a, b = format(min(v), fmt), format(max(v), fmt)
    return a if a == b else f"{a}–{b}"


def grep(path: str, pattern: str, group: int = 1) -> str:
    "Group `group` of the first match of the regular expression `pattern` in the text file `results/<path>`."
    f = RESULTS / path
    if not f.exists():
        raise FileNotFoundError(f"results/{path} does not exist")
    m = re.search(pattern, f.read_text(), re.M)
    if m is None:
        raise ValueError(f"{pattern!r} does not match in results/{path}")
    return m.group(group)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    "Exact (Clopper–Pearson) two-sided interval of a binomial proportion k/n."
    a = 1 - level
    lo = 0.0 if k == 0 else float(_beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(_beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


PCT = {"MC": ".2f", "MC_se": ".2f", "CMC": ".2f", "CCC": ".1f", "CCC_se": ".1f", "inf_frac": ".1f"}


def _grid(folder: str, method, guarantee, col, where):
    "Rows of `<folder>/results.csv` (a `pfwcp-experiments` folder); n_cal_test = 100 unless given."
    path = f"{folder}/results.csv"
    where = {k: v for k, v in dict(method=method, guarantee=guarantee, **where).items() if v is not None}
    if "n_cal_test" in table(path).columns and "n_cal_test" not in where:
        where["n_cal_test"] = 100
    col = col or ("MC" if guarantee == "mc" else "CCC")
    return rows(path, **where), col


def cell(folder: str, method: str, guarantee: str, dataset: str, col: str | None = None, fmt: str | None = None,
         **where) -> str:
    """One metric of one cell of `<folder>/results.csv`: MC for guarantee 'mc', CCC for 'ccc' unless `col` says;
    percentages (MC, CMC: 2 decimals; CCC, inf_frac: 1) for the columns of PCT, else the value (2 decimals)."""
    d, col = _grid(folder, method, guarantee, col, dict(dataset=dataset, **where))
    if len(d) != 1:
        raise ValueError(f"{len(d)} rows of results/{folder}/results.csv for {method} {guarantee} {dataset} {where}")
    x = float(d[col].iloc[0])
    return format(100 * x, fmt or PCT[col]) if col in PCT else format(x, fmt or ".2f")


def cells(folder: str, method: str, guarantee: str, col: str | None = None, fmt: str | None = None, **where) -> str:
    "min–max of `cell` over the selected rows (every dataset unless `dataset=` names some)."
    d, col = _grid(folder, method, guarantee, col, where)
    x = d[col].astype(float) * (100 if col in PCT else 1)
    a, b = format(x.min(), fmt or PCT.get(col, ".2f")), format(x.max(), fmt or PCT.get(col, ".2f"))
    return a if a == b else f"{a}–{b}"


def count(path: str, query: str, **where) -> str:
    "How many selected rows satisfy the pandas query `query` (e.g. 'MC >= 0.9')."
    return str(len(rows(path, **where).query(query)))


def which(path: str, query: str, key: str = "dataset", **where) -> str:
    "The `key` values (comma-separated, in file order) of the selected rows satisfying `query`."
    v = list(dict.fromkeys(rows(path, **where).query(query)[key].astype(str)))
    return ", ".join(v) if v else "none"


def max_diff(path_a: str, path_b: str, cols=("MC", "CCC", "CMC", "Eff_finite", "inf_frac"),
             on=("dataset", "heterogeneity", "weights", "guarantee", "method"), fmt: str = ".2g", **where) -> str:
    "Largest |a - b| over the common rows (joined on `on`) and columns `cols` of two CSVs: '0' when identical."
    a, b = rows(path_a, **where), rows(path_b, **where)
    j = a.merge(b, on=list(on), suffixes=("_a", "_b"))
    if j.empty:
        raise ValueError(f"results/{path_a} and results/{path_b} have no rows in common on {on}")
    d = max(float((j[c + "_a"].astype(float) - j[c + "_b"].astype(float)).abs().max()) for c in cols)
    return "0" if d == 0 else format(d, fmt)


def draw_seconds(path: str, fmt: str = ".1f", **where) -> str:
    "CPU seconds spent building the draws of the selected rows (`draw_seconds` counted once per dataset × setting × guarantee)."
    d = rows(path, **where)
    keys = [c for c in ("dataset", "heterogeneity", "weights", "guarantee", "n_cal_test", "K") if c in d.columns]
    return format(d.groupby(keys).draw_seconds.first().sum(), fmt)


def ci(k: int, n: int, fmt: str = ".1f") -> str:
    "The exact 95 % interval of k successes in n, in percent: '[99.3, 100.0]'."
    lo, hi = clopper_pearson(int(k), int(n))
    return f"[{format(100 * lo, fmt)}, {format(100 * hi, fmt)}]"


def ccc(path: str, fmt: str = ".1f", **where) -> str:
    "A CCC cell with its exact 95 % interval, e.g. '100.0 [99.3, 100.0]' (k = CCC·n_sims draws passed)."
    d = rows(path, **where)
    if len(d) != 1:
        raise ValueError(f"{len(d)} rows of results/{path} with {where}; add a filter so that one remains")
    n = int(d["n_sims"].iloc[0])
    k = int(round(float(d["CCC"].iloc[0]) * n))
    lo, hi = clopper_pearson(k, n)
    return f"{format(100 * k / n, fmt)} [{format(100 * lo, fmt)}, {format(100 * hi, fmt)}]"


NAMESPACE = {f.__name__: f for f in (table, rows, val, pct, span, pspan, total, draw_seconds, jsonl, jspan, grep, cell, cells,
                                     count, which, max_diff,
                                     clopper_pearson, ci, ccc, round, float, int, min, max, abs, len, sum, format, str)}
