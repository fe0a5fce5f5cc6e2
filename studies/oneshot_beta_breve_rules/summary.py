"""Summary of the beta_breve study: every per-draw CSV under results/oneshot_beta_breve_rules/ in one markdown table.

Usage: python studies/oneshot_beta_breve_rules/summary.py > results/oneshot_beta_breve_rules/summary.md   (from the repository root)

Per dataset / heterogeneity / weights / test points / rule / guarantee: MC (mean coverage, %), CCC (share of draws with
coverage >= 90 %), median size, infeasible test points (%), beta_breve; the paper's osPFWCP values (Tables 2 and 3,
severe, estimated weights) from results/severe/compare_*_severe.csv; and the severe grid's osPFWCP at 500 x 500.
"""
import glob, os, sys
import numpy as np
import pandas as pd
from scipy import stats

def main():
    root = "results/oneshot_beta_breve_rules"
    parts = []
    for f in sorted(glob.glob(os.path.join(root, "**", "*.csv"), recursive=True)):
        d = pd.read_csv(f)
        d["m"] = int(f.rsplit("x", 1)[1].split(".")[0])
        parts.append(d)
    df = pd.concat(parts)
    df = df.drop_duplicates(["dataset", "heterogeneity", "weights", "m", "draw", "rule", "guarantee"])
    paper = {}
    for g, fn in (("mc", "compare_mc_severe.csv"), ("ccc", "compare_ccc_severe.csv")):
        c = pd.read_csv(os.path.join("results/severe", fn))
        c = c[(c.method == "osPFWCP") & (c.metric == g.upper())]
        paper.update({(r.dataset, g): (r.paper, r.ours, r.ours_se) for r in c.itertuples()})
    rows = []
    for key, g in df.groupby(["dataset", "heterogeneity", "weights", "m", "rule", "guarantee"], sort=False):
        ds, het, w, m, rule, gu = key
        c = g.coverage.to_numpy(); ok = c >= 0.9 - 1e-12; n = len(c)
        var_true = c.var(ddof=1) - np.mean(c * (1 - c)) / m      # per-draw variance minus the test-point noise
        ccc_true = stats.norm.sf((0.9 - c.mean()) / np.sqrt(var_true)) if var_true > 0 else float(c.mean() >= 0.9)
        p = paper.get((ds, gu)) if (het == "severe" and w == "estimated") else None
        rows.append(dict(dataset=ds, het=het, weights=w, size_=f"{n}x{m}", rule=rule, guarantee=gu,
                         MC=f"{100 * c.mean():.2f} ± {100 * c.std(ddof=1) / np.sqrt(n):.2f}",
                         CCC=f"{100 * ok.mean():.1f} ± {100 * np.sqrt(ok.mean() * (1 - ok.mean()) / n):.1f}",
                         CCC_cond=f"{100 * ccc_true:.0f}",
                         size=f"{g['size'].median():.3f}", infeasible=f"{100 * g.infeasible.mean():.2f}",
                         beta_breve=f"{g.beta_breve.mean():.3f}",
                         grid_500x500="" if p is None else f"{p[1]:.1f}", paper="" if p is None else f"{p[0]:.1f}"))
    order = {r: i for i, r in enumerate(["beta*", "alpha", "alpha/2", "worst", "cp"])}
    out = pd.DataFrame(rows)
    out["_k"] = [(w != "oracle", d, h, s, order.get(r, 9), g != "mc") for w, d, h, s, r, g in
                 zip(out.weights, out.dataset, out.het, out.size_, out.rule, out.guarantee)]
    out = out.sort_values("_k").drop(columns="_k").rename(columns={"size_": "draws x m", "grid_500x500": "severe grid (beta*, 500x500)",
                                             "infeasible": "infeasible %"})
    print("# osPFWCP: one-shot level rules (`studies/oneshot_beta_breve_rules/run.py`)\n")
    print("MC and CCC in % (± s.e. over draws); CCC = share of draws whose empirical coverage over m test points is")
    print(">= 90 %; `paper` and `severe grid` give MC (for mc rows) or CCC (for ccc rows) of osPFWCP at 500 x 500.")
    print("`CCC_cond` estimates P(conditional coverage >= 90 %) with the m-point noise removed: a normal law with the")
    print("per-draw mean and the per-draw variance minus mean(c(1-c))/m (indicative only; the paper's CCC is the column CCC).\n")
    print("| " + " | ".join(out.columns) + " |")
    print("|" + "---|" * len(out.columns))
    for r in out.itertuples(index=False):
        print("| " + " | ".join(map(str, r)) + " |")

if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    main()
