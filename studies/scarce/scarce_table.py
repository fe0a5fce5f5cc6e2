"""The table of studies/scarce/README.md from `results.csv`: coverage in % at each n_1 (MC rows: mean coverage of the
MC variant; CCC rows: share of draws with coverage >= 1 - alpha of the CCC variant) and the share of infinite sets.

    python studies/scarce/scarce_table.py results/scarce [--methods CP PFWCP osPFWCP]

Prints a markdown table (one row per dataset, weights and method); a column whose values are all equal prints the
value once ("100 everywhere" for a coverage). Exit 2 with a usage line on bad arguments."""
import argparse
import sys
from pathlib import Path

import pandas as pd


def _join(vals, fmt: str, same: str) -> str:
    s = [format(v, fmt) for v in vals]
    return (s[0] + same) if len(set(s)) == 1 else " / ".join(s)


def table(df: pd.DataFrame, methods) -> str:
    n1 = sorted(df.n_cal_test.unique())
    out = ["| dataset | method | MC | ∞ (MC) | CCC | ∞ (CCC) |", "|---|---|---|---|---|---|"]
    for ds in df.dataset.unique():
        for w in ("estimated", "oracle"):
            for m in methods:
                label = m if w == "estimated" else f"{m}-oracle"
                d = df[(df.dataset == ds) & (df.weights == w) & (df.method == label)]
                if d.empty:
                    continue
                g = {k: d[d.guarantee == k].set_index("n_cal_test").reindex(n1) for k in ("mc", "ccc")}
                out.append(f"| {ds}{'' if w == 'estimated' else ' (oracle)'} | {m} | "
                           f"{_join(100 * g['mc'].MC, '.1f', ' everywhere')} | {_join(100 * g['mc'].inf_frac, '.0f', '')} | "
                           f"{_join(100 * g['ccc'].CCC, '.1f', ' everywhere')} | {_join(100 * g['ccc'].inf_frac, '.0f', '')} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="a folder with the results.csv of the scarce runs (column n_cal_test)")
    p.add_argument("--methods", nargs="+", default=["CP", "PFWCP", "osPFWCP"])
    a = p.parse_args(argv)
    f = a.folder / "results.csv"
    if not f.is_file():
        p.error(f"{f} not found: pass the folder of the scarce runs, e.g. results/scarce")
    df = pd.read_csv(f)
    if "n_cal_test" not in df:
        p.error(f"{f} has no column n_cal_test: not a scarce run")
    print(f"Coverage in % at n_1 = {' / '.join(str(n) for n in sorted(df.n_cal_test.unique()))}, from `{f.name}`:\n")
    print(table(df, a.methods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
