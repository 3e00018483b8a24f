"""--compare: the ratios B / A of two report.json files, as compare.md, compare.png and compare.json."""
import json
import os

from .charts import md_table, num, ratio_bars, ratio_groups
from .common import die


def compare(a_path, b_path, out):
    reps = []
    for p in (a_path, b_path):
        try:
            with open(p) as f:
                r = json.load(f)
            r["speed"], r["accuracy"], r["serving"]  # noqa: B018 (the keys a report has)
        except OSError as e:
            die(f"--compare {p}: {e.strerror}")
        except (ValueError, KeyError, TypeError):
            die(f"--compare {p}: not a report.json written by scripts/report.py")
        reps.append(r)
    a, b = reps
    formats = dict.fromkeys(r["format"] for r in b["speed"] if r["engine"] == "plainllama")
    groups = ratio_groups((b, "plainllama"), (a, "plainllama"), formats)
    if not groups:
        die(f"--compare: {a_path} and {b_path} have no measurement in common")
    os.makedirs(out, exist_ok=True)
    ratio_bars(out, "compare.png", groups, f"B / A: {os.path.basename(os.path.dirname(os.path.abspath(b_path)))} / "
               f"{os.path.basename(os.path.dirname(os.path.abspath(a_path)))}",
               "ratio, B / A (log scale; tokens/s above 1: B faster)")
    rows = [[g, k, num(v, "{:.3f}")] for g, d in groups for k, v in d.items()]
    md = ["# Comparison", "", f"A: `{a_path}` ({a['meta']['date']}, commit `{a['meta']['commit']}`, "
          f"{a['meta']['cpu']})", "",
          f"B: `{b_path}` ({b['meta']['date']}, commit `{b['meta']['commit']}`, {b['meta']['cpu']})", "",
          "Ratios B / A (tokens/s: above 1 is faster in B; perplexity and latency: below 1 is lower in B).", "",
          md_table(["format", "measure", "B / A"], rows), "", "![B / A](compare.png)", ""]
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump({"a": a_path, "b": b_path, "ratios": [{"group": g, "measure": k, "ratio": v}
                                                         for g, d in groups for k, v in d.items()]}, f, indent=1)
