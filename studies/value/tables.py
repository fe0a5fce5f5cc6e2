"""The value benchmark's tables of the ratio settings (`--n-ratio`, `--ratio-hparams`), the natural federations and
the end-to-end comparison (the test agent alone, the federated model with local CP, with the preset), from the summary
CSV of `run.py --summary` and the end-to-end CSV of `run.py --end-to-end`. Printed by `run.py --table NAME`."""
import numpy as np
import pandas as pd

ALPHA = DELTA = 0.1
FEDERATED = ("PFWCP", "osPFWCP", "osPFWCP-pool")           # the federated methods the preset is compared with
COLUMNS = ("CP", "PFWCP", "osPFWCP", "osPFWCP-pool", "Recommended")


def _cell(r) -> str:
    "One method in one cell: coverage (MC %, or CCC %), ✗ if not valid, the width ratio to local CP, the infinite share."
    cov = 100 * (r.MC if r.guarantee == "mc" else r.CCC)
    ratio = "–" if not np.isfinite(r.ratio) else f"×{r.ratio:.3f}"
    inf = f", ∞ {100 * r.inf_share:.0f} %" if r.inf_share >= 0.005 else ""
    return f"{cov:.1f}{'' if r.valid else ' ✗'} {ratio}{inf}"


def _label(method, weights):
    return method + (" (true ratios)" if weights == "oracle" else "")


def _wide(s, keys, methods=COLUMNS):
    "One row per `keys` value, one column per method and weights: `_cell`."
    cols = [(m, w) for m in methods for w in ("estimated", "oracle") if ((s.method == m) & (s.weights == w)).any()]
    out = ["| " + " | ".join(keys) + " | " + " | ".join(_label(m, w) for m, w in cols) + " |",
           "|" + "---|" * (len(keys) + len(cols))]
    for k, g in s.groupby(keys, sort=True):
        k = k if isinstance(k, tuple) else (k,)
        row = [next(iter(_cell(r) for r in g[(g.method == m) & (g.weights == w)].itertuples()), "–") for m, w in cols]
        out.append("| " + " | ".join(str(v).upper() if isinstance(v, str) and v in ("mc", "ccc") else str(v)
                                      for v in k) + " | " + " | ".join(row) + " |")
    return "\n".join(out)




def n_ratio_targets(s):
    """The preset (`Recommended`, estimated ratios) per n_1, n_ratio and guarantee, over the datasets run (severe): how
    many cells are valid, narrower or wider than local CP beyond two s.e., the width ratio and the finite share."""
    h = s[(s.heterogeneity == "severe") & (s.method == "Recommended") & (s.weights == "estimated")]
    out = ["| n_1 | n_ratio | hyperparameters | guarantee | datasets | valid | narrower than CP | wider than CP |"
           " width ratio median (max) | finite share, min |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (n1, n, hp, g), x in h.groupby(["n1", "n_ratio", "ratio_hparams", "guarantee"]):
        med = "–" if not np.isfinite(x.ratio).any() else f"{x.ratio.median():.3f} ({x.ratio.max():.3f})"
        out.append(f"| {n1} | {n} | {hp} | {g.upper()} | {len(x)} | {int(x.valid.sum())} | {int(x.narrower.sum())} | "
                   f"{int(x.wider.sum())} | {med} | {100 * (1 - x.inf_share.max()):.1f} % |")
    return "\n".join(out)


def n_ratio_table(s, n1=100, hparams="paper"):
    "Severe, n_1 = `n1`, the ratio classifiers `hparams`: per dataset, n_ratio and guarantee, each method's coverage and width ratio."
    h = s[(s.heterogeneity == "severe") & (s.n1 == n1) & (s.ratio_hparams == hparams)]
    return _wide(h, ["dataset", "n_ratio", "guarantee"])


def n_ratio_select_table(s):
    "The selected ratio classifiers (`--ratio-hparams select`, cross-fitted): per dataset, n_1, n_ratio and guarantee."
    h = s[(s.heterogeneity == "severe") & (s.ratio_hparams == "select")]
    return _wide(h, ["dataset", "n1", "n_ratio", "guarantee"])


def n_ratio_scarce_table(s):
    "The same where the test agent is scarce (severe, n_1 = 20)."
    return n_ratio_table(s, n1=20)


def natural_table(s):
    "The natural federations (estimated ratios): per dataset, n_1 and guarantee, each method's coverage and width ratio."
    return _wide(s[s.heterogeneity == "natural"], ["dataset", "n1", "guarantee"])


def natural_targets(s):
    """Per natural federation, n_1 and guarantee: the preset's validity and width ratio to local CP, the narrowest
    federated method valid with no infinite set on the same draws, and the preset's width relative to it."""
    h = s[(s.heterogeneity == "natural") & (s.weights == "estimated")]
    out = ["| dataset | n_1 | guarantee | preset valid | preset width ratio to CP | narrowest valid federated method "
           "| its ratio | preset / it |", "|---|---|---|---|---|---|---|---|"]
    for (ds, n1, g), x in h.groupby(["dataset", "n1", "guarantee"]):
        p = x[x.method == "Recommended"]
        if p.empty:
            continue
        p = p.iloc[0]
        fed = x[x.method.isin(FEDERATED) & x.valid & (x.inf_share == 0) & np.isfinite(x.ratio)].sort_values("ratio")
        best = fed.iloc[0] if len(fed) else None
        rel = "–" if best is None or not np.isfinite(p.ratio) else f"{p.ratio / best.ratio:.3f}"
        out.append(f"| {ds} | {n1} | {g.upper()} | {'yes' if p.valid else 'no'} | "
                   + ("–" if not np.isfinite(p.ratio) else f"{p.ratio:.3f} ± {p.ratio_se:.3f}")
                   + f" | {'none' if best is None else best.method} | "
                   + ("–" if best is None else f"{best.ratio:.3f}") + f" | {rel} |")
    return "\n".join(out)


E2E = ("Alone", "CP", "Recommended")    # the test agent alone; the federated model with local CP; with the preset
E2E_NAMES = {"Alone": "alone (own model, local CP)", "CP": "federated model, local CP",
             "Recommended": "federated model, preset"}


def end_to_end(df):
    """What joining buys, per cell: the test agent alone, the federated model with local CP and with the preset
    (estimated ratios), paired on the same draws: MC and CCC (s.e.), mean width of the finite sets, the width ratio to
    the test agent alone (paired per draw, finite sets; s.e.) and the infinite share."""
    keys = ["dataset", "heterogeneity", "n1", "n_ratio", "ratio_hparams", "guarantee"]
    d = df[df.method.isin(E2E) & (df.weights == "estimated")]
    d = d.drop_duplicates(keys + ["sim", "method"], keep="last")
    alone = d[d.method == "Alone"].set_index(keys + ["sim"]).size_finite
    rows = []
    for cell, g in d.groupby(keys + ["method"]):
        c, N = g.coverage.to_numpy(), len(g)
        ok = (c >= 1 - ALPHA).astype(float)
        r = g.size_finite.to_numpy() / alone.reindex(pd.MultiIndex.from_frame(g[keys + ["sim"]])).to_numpy()
        r = r[np.isfinite(r)]
        rows.append(dict(zip(keys + ["method"], cell), n_sims=N, MC=c.mean(), MC_se=c.std(ddof=1) / np.sqrt(N),
                         CCC=ok.mean(), CCC_se=np.sqrt(max(ok.mean() * (1 - ok.mean()), 1 / N) / N),
                         width=g.size_finite.mean(), ratio_to_alone=r.mean() if r.size else np.nan,
                         ratio_to_alone_se=r.std(ddof=1) / np.sqrt(r.size) if r.size > 1 else np.nan,
                         inf_share=g.inf_share.mean()))
    out = pd.DataFrame(rows)
    mc = out.guarantee == "mc"
    out["valid"] = np.where(mc, out.MC >= 1 - ALPHA - 2 * out.MC_se, out.CCC >= 1 - DELTA - out.CCC_se)
    return out


def end_to_end_table(e):
    "The headline: per dataset (n_1 = 100, the paper's ratios; natural: every n_1), the three answers side by side."
    e = e[(e.n_ratio == 50) & (e.ratio_hparams == "paper") & ((e.n1 == 100) | (e.heterogeneity == "natural"))]
    out = ["| dataset | n_1 | guarantee | " + " | ".join(E2E_NAMES[m] for m in E2E) + " |", "|---|---|---|---|---|---|"]
    for (ds, n1, g), x in e.groupby(["dataset", "n1", "guarantee"], sort=True):
        cells = []
        for m in E2E:
            r = x[x.method == m]
            if r.empty:
                cells.append("–"); continue
            r = r.iloc[0]
            cov = f"{100 * (r.MC if g == 'mc' else r.CCC):.1f}{'' if r.valid else ' ✗'}"
            w = "∞" if not np.isfinite(r.width) else f"{r.width:.3g}"
            rel = "" if m == "Alone" or not np.isfinite(r.ratio_to_alone) else \
                f" (×{r.ratio_to_alone:.2f} ± {r.ratio_to_alone_se:.2f})"
            inf = f", ∞ {100 * r.inf_share:.0f} %" if r.inf_share >= 0.005 else ""
            cells.append(f"{cov} % · {w}{rel}{inf}")
        out.append(f"| {ds} | {n1} | {g.upper()} | " + " | ".join(cells) + " |")
    return "\n".join(out)


TABLES = {"n-ratio": n_ratio_table, "n-ratio-scarce": n_ratio_scarce_table, "n-ratio-targets": n_ratio_targets,
          "n-ratio-select": n_ratio_select_table, "natural": natural_table,
          "natural-targets": natural_targets, "end-to-end": end_to_end_table}
