"""Small tables over a `pfwcp-experiments` results folder, quoted by results/README.md (generated blocks).

    python studies/paper_grid/grid_tables.py infinite results/severe [--methods PFWCP]   share of infinite sets, estimated vs oracle
    python studies/paper_grid/grid_tables.py ccc-below-mc results/severe                  cells whose CCC variant covers less on average
"""
import argparse
import sys
from pathlib import Path

import pandas as pd

ORDER = ["gaussian", "poisson", "airfoil", "protein", "bike", "concrete", "crime", "star", "cifar10c"]


def load(folder: str) -> pd.DataFrame:
    d = pd.read_csv(Path(folder) / "results.csv")
    if "n_cal_test" in d:
        d = d[d.n_cal_test == 100]
    d = d.assign(base=d.method.str.replace("-oracle", "", regex=False))
    return d


def infinite(d: pd.DataFrame, methods) -> str:
    "Share of test points with an infinite interval (%), estimated vs oracle weights, per dataset."
    out = ["| method | guarantee | weights | " + " | ".join(x for x in ORDER if x in set(d.dataset)) + " |"]
    ds = [x for x in ORDER if x in set(d.dataset)]
    out.append("|---|---|---|" + "---:|" * len(ds))
    for m in methods:
        for g in ("mc", "ccc"):
            for w in ("estimated", "oracle"):
                r = d[(d.base == m) & (d.guarantee == g) & (d.weights == w)].set_index("dataset")
                if r.empty:
                    continue
                out.append(f"| {m} | {g.upper()} | {w} | " + " | ".join(
                    f"{100 * r.inf_frac[x]:.1f}" if x in r.index else "–" for x in ds) + " |")
    return "\n".join(out)


def ccc_below_mc(d: pd.DataFrame) -> str:
    "Cells whose CCC variant's mean coverage is below its MC variant's (same draws), by more than 2 standard errors."
    k = ["dataset", "weights", "base"]
    mc = d[d.guarantee == "mc"].set_index(k)
    cc = d[d.guarantee == "ccc"].set_index(k)
    j = mc[["MC", "MC_se"]].add_suffix("_mc").join(cc[["MC", "MC_se"]].add_suffix("_ccc"), how="inner")
    se = (j.MC_se_mc ** 2 + j.MC_se_ccc ** 2) ** 0.5
    j = j[j.MC_ccc < j.MC_mc - 2 * se].reset_index().sort_values(["weights", "base", "dataset"])
    out = ["| method | weights | dataset | mean coverage, MC variant (%) | mean coverage, CCC variant (%) |",
           "|---|---|---|---:|---:|"]
    out += [f"| {r.base} | {r.weights} | {r.dataset} | {100 * r.MC_mc:.2f} | {100 * r.MC_ccc:.2f} |" for r in j.itertuples()]
    return "\n".join(out) if len(j) else "(none)"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["infinite", "ccc-below-mc"])
    p.add_argument("folder")
    p.add_argument("--methods", nargs="+", default=["PFWCP"])
    a = p.parse_args()
    if not (Path(a.folder) / "results.csv").exists():
        p.error(f"{a.folder}/results.csv not found")
    d = load(a.folder)
    print(infinite(d, a.methods) if a.what == "infinite" else ccc_below_mc(d))
    sys.exit(0)
