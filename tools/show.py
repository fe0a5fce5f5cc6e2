"""Print a text file of results/ for a generated block of tools/make_readme.py: inside a ``` fence, or as it is.

Usage: python tools/show.py FILE [--skip-comments] [--raw] [--skip-title]
  --skip-comments  drop lines starting with '#' (the command line of a .txt output)
  --raw            no fence (the file is markdown)
  --skip-title     drop a first line starting with '# ' (a markdown title)
"""
import sys
from pathlib import Path

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    if len(args) != 1 or not Path(args[0]).is_file() or flags - {"--skip-comments", "--raw", "--skip-title"}:
        print("usage: python tools/show.py FILE [--skip-comments] [--raw] [--skip-title]", file=sys.stderr)
        sys.exit(2)
    lines = Path(args[0]).read_text().splitlines()
    if "--skip-title" in flags and lines and lines[0].startswith("# "):
        lines = lines[1:]
    if "--skip-comments" in flags:
        lines = [l for l in lines if not l.startswith("#")]
    text = "\n".join(lines).strip("\n")
    print(text if "--raw" in flags else "```\n" + text + "\n```")
