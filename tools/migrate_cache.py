"""Give the files of a cache written before `cache.CACHE_SCHEMA` existed (schema 1: names without a `v<N>__` prefix)
their schema-2 names, so that trained models and finished cells are not computed again.

    python tools/migrate_cache.py CACHE_DIR [--dry-run]

The package itself reads only files of its own schema (no compatibility code); this one-off tool is the bridge. A
file is renamed only when its schema-1 name is recomputed exactly from what it holds and it has every field of the
current format:
- a cell (`cells/*.npz`): its `meta` gives the configuration; it needs `size_finite`, `flagged`, and `n_warned`,
  `n_flagged`, `warnings` in its meta (older cells are left where they are, and so computed again);
- trained models (`models/*.pkl`): the name gives dataset, heterogeneity, seeds and ratio model; the training settings
  (K, n_train, n_cal, train_kw) are matched against those of the cells in the same cache and the package defaults.
Chunks of unfinished cells are not migrated. Run it on a copy if others use the cache. Exit 0; 2 on bad arguments."""
import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pfwcp_nb.methods import get_spec  # noqa: E402
from pfwcp_nb.cache import CACHE_SCHEMA, RunConfig, frozen_noise, load_cell  # noqa: E402
from pfwcp_nb.pipeline import DEFAULT_TRAIN_KW  # noqa: E402


def _h(obj) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:10]


def _tag(model_seed: int) -> str:
    return "" if model_seed == 0 else f"_model{model_seed}"


def v1_setup_key(cfg: RunConfig) -> str:
    "The schema-1 name of the trained models of `cfg` (the package's key function before CACHE_SCHEMA)."
    base = f"{cfg.dataset}__{cfg.heterogeneity}__seed{cfg.seed}{_tag(cfg.model_seed)}__" \
           f"{_h([cfg.K, cfg.n_train, cfg.n_cal // 2, json.loads(cfg.train_kw)])}"
    return base if cfg.ratio_model == "paper" else f"{base}__ratios-{cfg.ratio_model}"


def v1_cell_key(cfg: RunConfig, method: str, guarantee: str, weights: str) -> str:
    "The schema-1 name of a cell of `cfg`."
    h = _h([cfg.K, cfg.n_train, cfg.n_cal, cfg.engine, json.loads(cfg.train_kw)]
           + ([] if cfg.n_cal_test is None else [{"n_cal_test": cfg.n_cal_test}])
           + ([{"ratio_model": cfg.ratio_model}] if cfg.ratio_model != "paper" and weights == "estimated" else [])
           + (["frozen-noise"] if get_spec(method).needs_localizer and frozen_noise(cfg.dataset) else [])
           + ([{"options": cfg.options(method)}] if cfg.options(method) else []))
    lv = f"a{cfg.alpha:g}" + ("" if guarantee == "mc" else f"_d{cfg.delta:g}")
    return (f"{cfg.dataset}__{cfg.heterogeneity}__{weights}__{method}__{guarantee}__"
            f"S{cfg.n_sims}_m{cfg.n_test}_{lv}__seed{cfg.seed}{_tag(cfg.model_seed)}__{h}")


CELL_META = ("n_warned", "n_flagged", "warnings")
CELL_ARRAYS = ("coverage", "size", "size_finite", "inf_count", "flagged")


def cell_config(path: Path):
    "(RunConfig, method, guarantee, weights) of a schema-1 cell file, or a reason why it is not migrated."
    z = load_cell(path)
    m = z["meta"]
    missing = [k for k in CELL_META if m.get(k) is None] + [k for k in CELL_ARRAYS if k not in z]
    if missing:
        return f"written before {missing} existed"
    ms = re.search(r"__seed\d+(?:_model(\d+))?__[0-9a-f]{10}$", path.stem)
    if ms is None:
        return "name not of schema 1"
    cfg = RunConfig(m["dataset"], m["heterogeneity"], n_sims=m["n_sims"], n_test=m["n_test"], alpha=m["alpha"],
                    delta=m["delta"], seed=m["seed"], K=m["K"], n_train=m["n_train"], n_cal=m["n_cal"],
                    engine=m["engine"], train_kw=json.dumps(m["train_kw"], sort_keys=True),
                    n_cal_test=m["n_cal_test"], ratio_model=m.get("ratio_model", "paper"),
                    model_seed=int(ms.group(1) or 0), method_kw=json.dumps(m["options"], sort_keys=True))
    cell = (m["method"], m["guarantee"], m["weights"])
    if v1_cell_key(cfg, *cell) != path.stem:
        return "its meta does not give back its name"
    return cfg, cell


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache_dir", type=Path, help="a pfwcp-experiments --cache-dir")
    ap.add_argument("--dry-run", action="store_true", help="print what would be renamed, rename nothing")
    a = ap.parse_args(argv)
    if not (a.cache_dir / "models").is_dir() and not (a.cache_dir / "cells").is_dir():
        ap.error(f"{a.cache_dir} holds no models/ or cells/ folder: pass a pfwcp-experiments --cache-dir")
    moves, kept, settings = [], [], {(11, 50, 100, json.dumps(DEFAULT_TRAIN_KW, sort_keys=True))}
    for p in sorted((a.cache_dir / "cells").glob("*.npz")):
        if p.name.startswith("v"):
            continue
        got = cell_config(p)
        if isinstance(got, str):
            kept.append((p, got))
            continue
        cfg, cell = got
        settings.add((cfg.K, cfg.n_train, cfg.n_cal, cfg.train_kw))
        moves.append((p, p.with_name(cfg.cell_key(*cell) + ".npz")))
    for p in sorted((a.cache_dir / "models").glob("*.pkl")):
        if p.name.startswith("v"):
            continue
        mm = re.fullmatch(r"(\w+?)__(\w+?)__seed(\d+)(?:_model(\d+))?__[0-9a-f]{10}(?:__ratios-(\w+))?", p.stem)
        found = None
        for K, n_train, n_cal, train_kw in sorted(settings) if mm else []:
            cfg = RunConfig(mm.group(1), mm.group(2), seed=int(mm.group(3)), model_seed=int(mm.group(4) or 0),
                            ratio_model=mm.group(5) or "paper", K=K, n_train=n_train, n_cal=n_cal, train_kw=train_kw)
            if v1_setup_key(cfg) == p.stem:
                found = cfg
                break
        if found is None:
            kept.append((p, "training settings not found among the cells' and the defaults"))
        else:
            moves.append((p, p.with_name(found.setup_key() + ".pkl")))
    for src, dst in moves:
        print(f"{'would rename' if a.dry_run else 'renamed'} {src.relative_to(a.cache_dir)} -> {dst.name}")
        if not a.dry_run:
            os.replace(src, dst)
    for p, why in kept:
        print(f"left {p.relative_to(a.cache_dir)}: {why} (computed again when needed)")
    print(f"schema {CACHE_SCHEMA}: {len(moves)} files {'to rename' if a.dry_run else 'renamed'}, {len(kept)} left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
