"""--compare: the ratios B / A of two report.json files, as compare.md, compare.png and compare.json."""
import json
import os

from .charts import md_table, num, ratio_bars
from .common import CONCURRENCY, die


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
    groups = []
    for f in dict.fromkeys(r["format"] for r in b["speed"] if r["engine"] == "plainllama"):
        d = {}
        for rb in (r for r in b["speed"] if r["engine"] == "plainllama" and r["format"] == f):
            ra = next((r for r in a["speed"] if r["engine"] == "plainllama" and r["format"] == f
                       and r["depth"] == rb["depth"]), None)
            for k in ("pp", "tg"):
                if ra and ra.get(k + "_tok_s") and rb.get(k + "_tok_s"):
                    d[f"{k} @ depth {rb['depth']} (tokens/s)"] = rb[k + "_tok_s"] / ra[k + "_tok_s"]
        ra = next((r for r in a["accuracy"] if r["engine"] == "plainllama" and r["format"] == f), None)
        rb = next((r for r in b["accuracy"] if r["engine"] == "plainllama" and r["format"] == f), None)
        if ra and rb:
            d["perplexity"] = rb["ppl"] / ra["ppl"]
        if d:
            groups.append((f, d))
    for k in CONCURRENCY:
        ra = next((r for r in a["serving"] if r["engine"] == "plainllama" and r["concurrency"] == k), None)
        rb = next((r for r in b["serving"] if r["engine"] == "plainllama" and r["concurrency"] == k), None)
        if ra and rb and ra["tokens_per_s"]:
            groups.append((f"serving x{k}", {"aggregate tokens/s": rb["tokens_per_s"] / ra["tokens_per_s"],
                                            "p95 latency": rb["latency_ms_p95"] / ra["latency_ms_p95"]
                                            if ra.get("latency_ms_p95") else None}))
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
