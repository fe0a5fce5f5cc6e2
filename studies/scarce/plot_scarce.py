"""The scarce-local-data study: coverage and size against the test agent's calibration size n_1.

Reads `results/scarce/results.csv` (rows of `pfwcp-experiments ... --n-cal-test N`, column `n_cal_test`) and writes
`results/scarce/figures/scarce.png` (one column of panels per dataset × weights) and `results/scarce/crossover.md`:
per dataset and guarantee, the n_1 from which local split CP is valid *and* gives at least as many finite sets as
PFWCP with a mean finite size no larger than PFWCP's (below it, federating calibration pays off).

Usage: python studies/scarce/plot_scarce.py [results/scarce]
"""
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

ALPHA = DELTA = 0.1
SCARCE_METHODS = ["CP", "FCP-QQ", "FWCP", "PFWCP", "osPFWCP"]
COLORS = dict(zip(SCARCE_METHODS, ["k", "tab:orange", "tab:green", "tab:blue", "tab:red"]))


def load(folder: Path) -> pd.DataFrame:
    df = pd.read_csv(folder / "results.csv")
    df["n_cal_test"] = df["n_cal_test"].fillna(100).astype(int)
    df["method"] = df["method"].str.replace("-oracle", "", regex=False)
    return df


def valid(r) -> bool:
    "Meets its guarantee within two Monte Carlo standard errors."
    if r.guarantee == "mc":
        return r.MC >= 1 - ALPHA - 2 * r.MC_se
    return r.CCC >= 1 - DELTA - 2 * r.CCC_se


def crossover(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (ds, w, g), d in df.groupby(["dataset", "weights", "guarantee"]):
        cp, pf = d[d.method == "CP"].set_index("n_cal_test"), d[d.method == "PFWCP"].set_index("n_cal_test")
        ns = sorted(set(cp.index) & set(pf.index))
        if not ns:
            continue
        cp_ok = [n for n in ns if valid(cp.loc[n]) and (1 - cp.loc[n].inf_frac) >= (1 - pf.loc[n].inf_frac)
                 and cp.loc[n].Eff_finite <= pf.loc[n].Eff_finite * 1.0 + 1e-12]
        pf_valid = [n for n in ns if valid(pf.loc[n])]
        rows.append(dict(dataset=ds, weights=w, guarantee=g, n1_checked=" ".join(map(str, ns)),
                         pfwcp_valid_at=" ".join(map(str, pf_valid)),
                         cp_as_good_from=(min(cp_ok) if cp_ok else "none of these"),
                         cp_inf=" / ".join(f"{100 * cp.loc[n].inf_frac:.0f}" for n in ns),
                         pfwcp_inf=" / ".join(f"{100 * pf.loc[n].inf_frac:.0f}" for n in ns),
                         cp_size=" / ".join(f"{cp.loc[n].Eff_finite:.3g}" for n in ns),
                         pfwcp_size=" / ".join(f"{pf.loc[n].Eff_finite:.3g}" for n in ns)))
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(str(v) for v in r) + " |\n" for r in df.itertuples(index=False))


def plot(df: pd.DataFrame, out: Path) -> None:
    groups = sorted(df.groupby(["dataset", "weights"]).groups)
    fig, axes = plt.subplots(4, len(groups), figsize=(3.2 * len(groups), 10), squeeze=False, sharex=True)
    for j, (ds, w) in enumerate(groups):
        d = df[(df.dataset == ds) & (df.weights == w)]
        for m in SCARCE_METHODS:
            for g, ls in (("mc", "-"), ("ccc", "--")):
                r = d[(d.method == m) & (d.guarantee == g)].sort_values("n_cal_test")
                if r.empty:
                    continue
                x, kw = r.n_cal_test, dict(color=COLORS[m], ls=ls, marker="o", ms=3, label=f"{m} {g.upper()}")
                if g == "mc":
                    axes[0, j].plot(x, 100 * r.MC, **kw)
                else:
                    axes[1, j].plot(x, 100 * r.CCC, **kw)
                axes[2, j].plot(x, r.Eff_finite, **kw)
                axes[3, j].plot(x, 100 * r.inf_frac, **kw)
        axes[0, j].axhline(100 * (1 - ALPHA), color="grey", lw=0.8)
        axes[1, j].axhline(100 * (1 - DELTA), color="grey", lw=0.8)
        axes[0, j].set_title(f"{ds} ({w} weights)")
        axes[3, j].set_xscale("log")
        axes[3, j].set_xticks(sorted(d.n_cal_test.unique()))
        axes[3, j].set_xticklabels(sorted(d.n_cal_test.unique()))
        axes[3, j].set_xlabel("test agent's calibration size $n_1$")
    for i, lab in enumerate(["MC: mean coverage (%)", "CCC: draws with cov. ≥ 90 % (%)", "mean size of finite sets",
                             "infinite sets (%)"]):
        axes[i, 0].set_ylabel(lab)
    axes[0, -1].legend(fontsize=6, loc="lower right")
    axes[1, -1].legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "results/scarce")
    if not (folder / "results.csv").exists():
        sys.exit(f"usage: python studies/scarce/plot_scarce.py [FOLDER]: {folder / 'results.csv'} not found")
    df = load(folder)
    plot(df, folder / "figures" / "scarce.png")
    cx = crossover(df)
    (folder / "crossover.md").write_text(
        "# When does PFWCP pay off? (written by `python studies/scarce/plot_scarce.py " + str(folder) + "`)\n\n"
        "`cp_as_good_from`: the smallest n_1 at which local split CP meets its guarantee (2 s.e.) with at least "
        "PFWCP's share of finite sets and a mean finite size no larger than PFWCP's. Infinite shares (%) and mean "
        "finite sizes are listed for the n_1 of `n1_checked`, in that order.\n\n" + markdown(cx))
    print(cx.to_string(index=False))
