"""PFWCP's recommended configuration (`--select finite-first --gamma auto`) next to the
paper's configuration on the same calibration draws, and the test agent's trust check against the per-draw coverage.

    python studies/recommended/summary.py --cache CACHE --out results/recommended_summary

Reads, per level L: results/recommended_L/results.csv (recommended, CCC), results/recommended_L/check/results.csv (the
paper's configuration with the check, CCC, estimated and oracle weights: the same draws), results/recommended_L/mc/ and
mc_paper/ (MC, recommended and paper configuration, estimated and oracle) where they exist, and results/L/results.csv
(the paper's 500-draw grid, for osPFWCP). The per-draw flags come from the check cells of CACHE. At the severe level
the between-training s.d. of PFWCP's cells (results/training_variability/variability.csv for the paper's configuration,
variability_recommended.csv for the recommended one: severe, 200 x 300, five trainings) is added to the Monte Carlo
s.e. in the `*_ok_train` verdicts (`studies/training_variability/`). Writes `table.csv`
(one row per dataset-level), `counts.md` (the counts per level against the targets below) and `check_flags.csv`.
Targets: PFWCP MC >= 90 % - 2 s.e., CCC >= 90 % - 1 s.e.; CCC infinite share <= 10 % (moderate, mild) /
<= half the paper rule's (severe); mean finite width within 15 % of the oracle-weight PFWCP's on the same draws."""
import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.cache import load_cell

LEVELS = ("severe", "moderate", "mild")


def _read(path) -> pd.DataFrame:
    p = Path(path)
    return pd.read_csv(p) if p.exists() else pd.DataFrame(columns=["dataset", "method", "guarantee"])


def _get(df, ds, method, g, col):
    r = df[(df.dataset == ds) & (df.method == method) & (df.guarantee == g)]
    return float(r[col].iloc[0]) if len(r) else np.nan


def _train_sd(name: str) -> dict:
    "(dataset, guarantee) -> between-training s.d. of PFWCP (severe), from results/training_variability/NAME."
    df = _read(f"results/training_variability/{name}")
    df = df[df.method == "PFWCP"] if len(df) else df
    return {(r.dataset, r.guarantee): float(r.train_sd) for r in df.itertuples()}


def rows(level: str) -> pd.DataFrame:
    full = _read(f"results/{level}/results.csv")
    sd = dict(rec=_train_sd("variability_recommended.csv"), paper=_train_sd("variability.csv")) if level == "severe" \
        else dict(rec={}, paper={})
    base = Path(f"results/recommended_{level}")
    rec = pd.concat([_read(base / "results.csv"), _read(base / "mc" / "results.csv")], ignore_index=True)
    check = _read(base / "check" / "results.csv")
    paper_mc = _read(base / "mc_paper" / "results.csv")
    own_mc = set(paper_mc.dataset)
    if len(check):     # datasets without an mc_paper/ run: the stored grid's MC cells (same models: `same_models_as_grid`)
        grid_mc = full[(full.guarantee == "mc") & full.method.isin(["PFWCP", "PFWCP-oracle"])
                       & (full.n_sims == check.n_sims.max()) & ~full.dataset.isin(set(paper_mc.dataset))]
        paper_mc = pd.concat([paper_mc, grid_mc], ignore_index=True)
    same = pd.concat([check, paper_mc], ignore_index=True)
    out = []
    for ds in sorted(set(full.dataset)):
        row = dict(level=level, dataset=ds, cell=f"{ds} ({level})", n_sims=_get(rec, ds, "PFWCP", "ccc", "n_sims"))
        # same models as the stored grid? its paper-configuration CCC cells against check/'s (same draws if same n_sims)
        row["paper_mc_from"] = "mc_paper" if ds in own_mc else "grid"
        row["same_models_as_grid"] = all(_get(check, ds, m, "ccc", c) == _get(full, ds, m, "ccc", c)
                                         for m in ("PFWCP", "PFWCP-oracle") for c in ("MC", "CCC", "inf_frac"))
        for g in ("mc", "ccc"):
            key = "MC" if g == "mc" else "CCC"
            for tag, df, m in (("rec", rec, "PFWCP"), ("paper", same, "PFWCP"), ("oracle", same, "PFWCP-oracle"),
                               ("rec_oracle", rec, "PFWCP-oracle")):
                row[f"{tag}_{g}"], row[f"{tag}_{g}_se"] = _get(df, ds, m, g, key), _get(df, ds, m, g, f"{key}_se")
                row[f"{tag}_{g}_inf"], row[f"{tag}_{g}_width"] = _get(df, ds, m, g, "inf_frac"), _get(df, ds, m, g, "Eff_finite")
            ok = (lambda v, se: v >= 0.9 - 2 * se) if g == "mc" else (lambda v, se: v >= 0.9 - se)
            for tag in ("rec", "paper", "oracle"):
                v = row[f"{tag}_{g}"]
                row[f"{tag}_{g}_ok"] = bool(ok(v, row[f"{tag}_{g}_se"])) if np.isfinite(v) else np.nan
            for tag in ("rec", "paper"):
                t = sd[tag].get((ds, g), np.nan)
                v, se = row[f"{tag}_{g}"], np.sqrt(row[f"{tag}_{g}_se"] ** 2 + t ** 2)
                row[f"{tag}_{g}_train_sd"] = t
                row[f"{tag}_{g}_ok_train"] = bool(ok(v, se)) if np.isfinite(v) and np.isfinite(t) else np.nan
            row[f"rec_{g}_width_vs_oracle"] = row[f"rec_{g}_width"] / row[f"oracle_{g}_width"] - 1
            row[f"paper_{g}_width_vs_oracle"] = row[f"paper_{g}_width"] / row[f"oracle_{g}_width"] - 1
            row[f"paper500_{g}"], row[f"paper500_{g}_se"] = _get(full, ds, "PFWCP", g, key), _get(full, ds, "PFWCP", g, f"{key}_se")
        row["os500_ccc"], row["os500_ccc_se"] = _get(full, ds, "osPFWCP", "ccc", "CCC"), _get(full, ds, "osPFWCP", "ccc", "CCC_se")
        row["os500_ccc_ok"] = bool(row["os500_ccc"] >= 0.9 - row["os500_ccc_se"])
        out.append(row)
    return pd.DataFrame(out)


def check_flags(cache: Path, level: str) -> list:
    "Per dataset and weights: the check's flag rate on the paper configuration's CCC draws, overall and by the draw's coverage."
    out = []
    for f in sorted(cache.glob(f"cells/*__{level}__*__PFWCP__ccc__*.npz")):
        z = load_cell(f)
        if not z["meta"].get("options", {}).get("check") or "flagged" not in z:
            continue
        cov, fl = z["coverage"], z["flagged"].astype(bool)
        low = cov < 0.9
        out.append(dict(level=level, dataset=z["meta"]["dataset"], weights=z["meta"]["weights"], n_draws=int(cov.size),
                        ccc=float(np.mean(~low)), n_flagged=int(fl.sum()), flag_rate=float(fl.mean()), n_below=int(low.sum()),
                        n_flagged_below=int(fl[low].sum()),
                        flag_rate_below=float(fl[low].mean()) if low.any() else np.nan,
                        flag_rate_above=float(fl[~low].mean()) if (~low).any() else np.nan))
    return out


def _n(s) -> str:
    s = s.dropna()
    return f"{int(s.sum())} of {len(s)}" if len(s) else "not run"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", required=True, help="the cache of the check runs (cells with per-draw flags)")
    p.add_argument("--out", default="results/recommended_summary")
    a = p.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    tab = pd.concat([rows(lv) for lv in LEVELS], ignore_index=True)
    tab.to_csv(out / "table.csv", index=False)
    fl = pd.DataFrame([r for lv in LEVELS for r in check_flags(Path(a.cache), lv)])
    fl.to_csv(out / "check_flags.csv", index=False)
    pct = lambda s: (f"{100 * np.nanmedian(s):+.1f} % (max {100 * np.nanmax(s):+.1f} %)" if s.notna().any() else "-")
    lines = ["| level | PFWCP MC ok: paper / recommended | PFWCP CCC ok: paper / recommended | osPFWCP CCC ok (paper grid, 500 draws) | "
             "PFWCP-CCC infinite share, max: paper / recommended | recommended finite width vs oracle PFWCP, MC | CCC | "
             "counting the training s.d.: MC ok, paper / recommended | CCC ok, paper / recommended |",
             "|---|---|---|---|---|---|---|---|---|"]
    for lv in LEVELS:
        t = tab[tab.level == lv]
        r = t[t.rec_ccc.notna()]
        lines.append(f"| {lv} | {_n(t.paper_mc_ok[t.rec_mc.notna()])} / {_n(t.rec_mc_ok)} | {_n(r.paper_ccc_ok)} / {_n(r.rec_ccc_ok)} | "
                     f"{_n(t.os500_ccc_ok)} | "
                     + (f"{100 * r.paper_ccc_inf.max():.1f} % / {100 * r.rec_ccc_inf.max():.1f} %" if len(r) else "-")
                     + f" | {pct(t.rec_mc_width_vs_oracle)} | {pct(r.rec_ccc_width_vs_oracle)} | "
                     + (f"{_n(t.paper_mc_ok_train)} / {_n(t.rec_mc_ok_train)} | {_n(t.paper_ccc_ok_train)} / "
                        f"{_n(t.rec_ccc_ok_train)} |" if t.rec_ccc_ok_train.notna().any() else "- (trainings at severe only) | - |"))
    (out / "counts.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(fl.to_string() if len(fl) else "no check cells")


if __name__ == "__main__":
    main()
