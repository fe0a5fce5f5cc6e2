#!/usr/bin/env python
"""What a curious server still learns through the whole pipeline over Flower, measured with the third red team's attacks.

usage: python studies/flower_pipeline/flower_pipeline_attacks.py [--out results/flower_pipeline/attacks.json]
Runs studies/redteam/attack_training_rows.py (training rows out of the ratio classifiers' updates, every round within
`round_move`) and studies/redteam/attack_test_weights.py (test points out of one test-weights answer, ratio networks
drifted within `round_move`), each also in the variant that skips rounds (refused by the agents); writes the outcomes
to OUT (.json) and a table beside it (.md)."""
import argparse, json, re, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = [  # (attack, script, arguments, what the variant does)
    ("training rows", "attack_training_rows.py", ["gaussian", "3"], "every round within the bound"),
    ("training rows", "attack_training_rows.py", ["concrete", "3"], "every round within the bound"),
    ("training rows", "attack_training_rows.py", ["gaussian", "3", "1"], "round 1, then a jump to the trap"),
    ("test points", "attack_test_weights.py", ["gaussian", "3", "rounds"], "600 rounds within the bound, then models"),
    ("test points", "attack_test_weights.py", ["gaussian", "11", "rounds"], "600 rounds within the bound, then models"),
    ("test points", "attack_test_weights.py", ["gaussian", "3", "skip"], "round 1, then the crafted models"),
]


def run(script, args):
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, str(ROOT / "studies" / "redteam" / script), *args], capture_output=True, text=True,
                       cwd=ROOT)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    refused = re.findall(r"QueryRefused: (.*)", r.stderr)
    return {"returncode": r.returncode, "stdout": lines, "refused": refused[-1] if refused else None,
            "seconds": time.perf_counter() - t0}


def row(attack, args, how, out):
    if out["refused"]:
        return f"| {attack} | {args[0]} | {args[1]} | {how} | refused by the agent: {out['refused'][:160]} |"
    if out["returncode"] != 0:
        return f"| {attack} | {args[0]} | {args[1]} | {how} | the script failed (exit {out['returncode']}) |"
    got = []
    for ln in out["stdout"]:
        if m := re.search(r"agent (\d+) .*trap set at round (\d+); (\d+)/(\d+) distinct rows exact \(max abs err ([^)]+)\); "
                          r"last round used (\d+) of (\d+)", ln):
            a, trap, k, n, err, last, T = m.groups()
            got.append(f"agent {a}: {k} of {n} rows (error {err}) by round {last} of {T}, trap set at round {trap}")
        elif m := re.search(r"(\d+) of (\d+) coordinates of all (\d+) test points from one test-weights answer; "
                            r"max abs error (\S+)", ln):
            c, d, m_, err = m.groups()
            got.append(f"{c} of {d} coordinates of all {m_} test points (error {err})")
    return f"| {attack} | {args[0]} | {args[1]} | {how} | recovered: {'; '.join(got) or 'nothing'} |"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/flower_pipeline/attacks.json")
    a = ap.parse_args(argv)
    out = {"command": "python studies/flower_pipeline/flower_pipeline_attacks.py" + ("" if a.out == ap.get_default("out") else f" --out {a.out}"),
           "runs": []}
    table = ["| attack | dataset | K | the server's moves | outcome |", "|---|---|---|---|---|"]
    for attack, script, args, how in RUNS:
        r = run(script, args)
        out["runs"].append({"attack": attack, "script": f"studies/redteam/{script}", "args": args, "variant": how, **r})
        table.append(row(attack, args, how, r))
        print(table[-1], flush=True)
    p = Path(a.out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(out, indent=1) + "\n")
    p.with_suffix(".md").write_text("\n".join(table) + "\n")
    print(f"wrote {p} and {p.with_suffix('.md')}")


if __name__ == "__main__":
    main()
