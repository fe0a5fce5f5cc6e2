"""Rewrite the tables of results folders from their results.csv with the current verdict rule.

Usage: python studies/paper_grid/retable.py results/severe results/main_job ...
       python studies/paper_grid/retable.py results/severe --trainings results/training_variability/all_runs.csv
The first form rewrites each folder's table_<guarantee>_<heterogeneity>[_n1-N].md (`report.table_markdown`, as
`pfwcp-experiments` writes them), keeping the line that says which command produced the values. The second writes,
beside FILE, table_<guarantee>_<heterogeneity>_mean.md: the folder's estimated-weight cells, each cell that FILE's
trainings (column model_seed) cover as the mean over them (`reproduce.with_means`), the others (†) as the folder's one
training. The spread over trainings (the package's training_spread.csv) is counted for severe heterogeneity, the
only level it was measured for.
"""
import argparse
import re
import sys
from pathlib import Path

import pandas as pd

from pfwcp_nb.report import PAPER_DATASET_ORDER, load_training_spread, table_markdown
from pfwcp_nb.reproduce import with_means

GUARANTEES = ("mc", "ccc")


def tables(df: pd.DataFrame, folder: Path, suffix: str, command: str) -> list[Path]:
    "Write one file per (size of the draws, heterogeneity, guarantee) of `df` into `folder`; keep its 'Produced by'."
    out = []
    n1 = df.n_cal_test if "n_cal_test" in df else pd.Series(100, index=df.index)
    for (het, k, g), d in df.assign(n_cal_test=n1).groupby(["heterogeneity", "n_cal_test", "guarantee"]):
        if suffix == "":                               # one size of the draws per file, as write_outputs writes them
            d = d[d.n_sims == d.n_sims.max()]
        p = folder / f"table_{g}_{het}{'' if k == 100 else f'_n1-{k}'}{suffix}.md"
        old = re.search(r"^Produced by: .*$", p.read_text(), re.M) if p.exists() else None
        spread = load_training_spread() if het == "severe" else None
        txt = table_markdown(d, g, alpha=d.alpha.iloc[0], delta=d.delta.iloc[0], spread=spread)
        p.write_text(txt + (f"\n{old.group(0)}\n" if old else "") + f"\nTables rewritten from the CSV: `{command}`\n")
        out.append(p)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", help="results folders holding a results.csv")
    p.add_argument("--trainings", default=None, help="rows of several trainings (column model_seed): their mean")
    a = p.parse_args()
    for f in a.folders:
        if not (Path(f) / "results.csv").is_file():
            p.error(f"{f}/results.csv not found")
    if a.trainings is not None and (not Path(a.trainings).is_file() or len(a.folders) != 1):
        p.error("--trainings FILE needs an existing FILE and one folder")
    command = "python studies/paper_grid/retable.py " + " ".join(sys.argv[1:])
    for f in a.folders:
        df = pd.read_csv(Path(f) / "results.csv")
        if a.trainings:
            est = df[(df.weights == "estimated")]
            runs = pd.read_csv(a.trainings)
            df = with_means(est[est.n_sims == est.n_sims.max()], runs)
        for path in tables(df, Path(a.trainings).parent if a.trainings else Path(f), "_mean" if a.trainings else "",
                           command):
            print(path)
    sys.exit(0)
