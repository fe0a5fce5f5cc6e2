"""Issue 17 items 4 and 7: the recommended configuration (results/recommended_<level>/) next to the paper's
(results/<level>/), and the trust check's flags against the per-draw coverage (results/recommended_<level>/check/).

    python scripts/recommended_summary.py --cache CACHE --out results/recommended_summary

Writes `table.csv` (one row per dataset-level), `counts.md` (the issue's counts per level), `check_flags.csv` and
`README`-ready markdown `summary.md`. Targets (issue 17): PFWCP MC >= 90 % - 2 s.e., CCC >= 90 % - 1 s.e.; CCC
infinite share <= 10 % (moderate, mild) / <= half the paper rule's (severe); mean finite width within 15 % of the
oracle-weight PFWCP's (the paper rule's `PFWCP-oracle` rows of results/<level>/)."""
import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.cache import load_cell

LEVELS = ("severe", "moderate", "mild")


def rows(level: str) -> pd.DataFrame:
    paper = pd.read_csv(f"results/{level}/results.csv")
    rec_path = Path(f"results/recommended_{level}/results.csv")
    rec = pd.read_csv(rec_path) if rec_path.exists() else paper.iloc[:0]
    out = []
    for ds in sorted(set(paper.dataset)):
        def get(df, method, g, col):
            r = df[(df.dataset == ds) & (df.method == method) & (df.guarantee == g)]
            return float(r[col].iloc[0]) if len(r) else np.nan
        row = dict(level=level, dataset=ds)
        for tag, df in (("paper", paper), ("rec", rec)):
            row[f"{tag}_mc"], row[f"{tag}_mc_se"] = get(df, "PFWCP", "mc", "MC"), get(df, "PFWCP", "mc", "MC_se")
            row[f"{tag}_ccc"], row[f"{tag}_ccc_se"] = get(df, "PFWCP", "ccc", "CCC"), get(df, "PFWCP", "ccc", "CCC_se")
            row[f"{tag}_ccc_inf"] = get(df, "PFWCP", "ccc", "inf_frac")
            row[f"{tag}_mc_inf"] = get(df, "PFWCP", "mc", "inf_frac")
            row[f"{tag}_mc_width"] = get(df, "PFWCP", "mc", "Eff_finite")
            row[f"{tag}_ccc_width"] = get(df, "PFWCP", "ccc", "Eff_finite")
        row["oracle_mc_width"] = get(paper, "PFWCP-oracle", "mc", "Eff_finite")
        row["oracle_ccc_width"] = get(paper, "PFWCP-oracle", "ccc", "Eff_finite")
        row["os_ccc"], row["os_ccc_se"] = get(paper, "osPFWCP", "ccc", "CCC"), get(paper, "osPFWCP", "ccc", "CCC_se")
        for tag in ("paper", "rec"):
            row[f"{tag}_mc_ok"] = row[f"{tag}_mc"] >= 0.9 - 2 * row[f"{tag}_mc_se"]
            row[f"{tag}_ccc_ok"] = row[f"{tag}_ccc"] >= 0.9 - row[f"{tag}_ccc_se"]
            for g in ("mc", "ccc"):
                row[f"{tag}_{g}_width_vs_oracle"] = row[f"{tag}_{g}_width"] / row[f"oracle_{g}_width"] - 1
        row["os_ccc_ok"] = row["os_ccc"] >= 0.9 - row["os_ccc_se"]
        row["rec_ran"] = not np.isnan(row["rec_mc"])
        out.append(row)
    return pd.DataFrame(out)


def check_flags(cache: Path, level: str) -> list:
    "Per dataset: the check's flag rate on the paper configuration's CCC draws, estimated vs oracle weights."
    out = []
    for f in sorted(cache.glob(f"cells/*__{level}__*__PFWCP__ccc__*.npz")):
        z = load_cell(f)
        if not z["meta"].get("options", {}).get("check") or "flagged" not in z:
            continue
        cov, fl = z["coverage"], z["flagged"].astype(bool)
        low = cov < 0.9
        out.append(dict(level=level, dataset=z["meta"]["dataset"], weights=z["meta"]["weights"], n_draws=cov.size,
                        ccc=float(np.mean(~low)), flag_rate=float(fl.mean()), n_below=int(low.sum()),
                        flag_rate_below=float(fl[low].mean()) if low.any() else np.nan,
                        flag_rate_above=float(fl[~low].mean()) if (~low).any() else np.nan))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cache", required=True, help="the cache of the check runs (cells with per-draw flags)")
    p.add_argument("--out", default="results/recommended_summary")
    a = p.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    tab = pd.concat([rows(lv) for lv in LEVELS], ignore_index=True)
    tab.to_csv(out / "table.csv", index=False)
    lines = ["| level | datasets run | PFWCP MC ok (paper / rec.) | PFWCP CCC ok (paper / rec.) | osPFWCP CCC ok (paper) | "
             "PFWCP-CCC inf. share max (paper / rec.) | finite width vs oracle, MC median (max) | CCC median (max) |",
             "|---|---|---|---|---|---|---|---|"]
    for lv in LEVELS:
        t = tab[(tab.level == lv)]
        r = t[t.rec_ran]
        pct = lambda s: f"{100 * np.nanmedian(s):+.1f} % ({100 * np.nanmax(s):+.1f} %)" if len(s) else "-"
        lines.append(f"| {lv} | {len(r)} of {len(t)} | {int(r.paper_mc_ok.sum())} / {int(r.rec_mc_ok.sum())} | "
                     f"{int(r.paper_ccc_ok.sum())} / {int(r.rec_ccc_ok.sum())} | {int(r.os_ccc_ok.sum())} | "
                     f"{100 * r.paper_ccc_inf.max():.1f} / {100 * r.rec_ccc_inf.max():.1f} % | "
                     f"{pct(r.rec_mc_width_vs_oracle)} | {pct(r.rec_ccc_width_vs_oracle)} |")
    (out / "counts.md").write_text("\n".join(lines) + "\n")
    fl = pd.DataFrame([r for lv in LEVELS for r in check_flags(Path(a.cache), lv)])
    fl.to_csv(out / "check_flags.csv", index=False)
    print("\n".join(lines))
    print(fl.to_string() if len(fl) else "no check cells")


if __name__ == "__main__":
    main()
