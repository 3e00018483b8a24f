"""The charts (PNG, with what each drew recorded for report.json) and the tables: write_report() writes
report.md, the charts beside it and report.json.
"""
import json
import os

from .common import CONCURRENCY, show


def plt_setup():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"figure.dpi": 100, "font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.axisbelow": True})
    return plt


COLORS = {"plainllama": "#1f77b4", "llama.cpp": "#ff7f0e"}
CHARTS = {}  # what each chart drew, read back from its axes (report.json's "charts")


def describe(name, fig, extra=None):
    """Records the axes of a saved figure: title, axis labels, legend series, x tick labels, bar labels."""
    axes = []
    for i, ax in enumerate(fig.axes):
        legend = ax.get_legend()
        d = {"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
             "series": [t.get_text() for t in legend.get_texts()] if legend else [],
             "xticks": [t.get_text() for t in ax.get_xticklabels()],
             "bar_labels": [t.get_text() for t in ax.texts if t.get_text()]}
        d.update((extra or [{}] * len(fig.axes))[i])
        axes.append(d)
    CHARTS[name] = {"axes": axes}


def chart_speed(rep, out, key, share_key, title, ylabel, share_what):
    """Bars of tok/s per format, one group per format, one bar per (engine, depth), labelled with the share."""
    plt = plt_setup()
    rows = [r for r in rep["speed"] if r.get(key) is not None]
    formats = list(dict.fromkeys(r["format"] for r in rows))
    series = list(dict.fromkeys((r["engine"], r["depth"]) for r in rows))
    fig, ax = plt.subplots(figsize=(min(16, max(8, 0.32 * len(formats) * max(1, len(series)) + 3)), 5))
    width = 0.8 / max(1, len(series))
    shades = {}
    for i, (engine, depth) in enumerate(series):
        xs, ys, labels = [], [], []
        for fi, f in enumerate(formats):
            r = next((r for r in rows if r["format"] == f and r["engine"] == engine and r["depth"] == depth), None)
            if r:
                xs.append(fi - 0.4 + width * (i + 0.5))
                ys.append(r[key])
                sh = r.get(share_key)
                labels.append(f"{100 * sh:.0f}%" if sh is not None else "")
        depths = sorted({d for e, d in series if e == engine})
        alpha = 1.0 - 0.45 * depths.index(depth) / max(1, len(depths) - 1)
        shades[(engine, depth)] = alpha
        bars = ax.bar(xs, ys, width, color=COLORS.get(engine, "#888"), alpha=alpha,
                      label=f"{engine}, depth {depth}")
        ax.bar_label(bars, labels=labels, fontsize=8, padding=2)
    ax.set_xticks(range(len(formats)))
    ax.set_xticklabels(formats, rotation=20 if len(formats) > 6 else 0)
    ax.set_xlabel("weight format")
    ax.set_ylabel(ylabel)
    ax.set_title(title + f"\n(bar labels: share of the {share_what} measured in the same run)")
    ax.set_ylim(0, max([r[key] for r in rows] + [1]) * 1.18)
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = f"speed_{key.split('_')[0]}.png"
    fig.savefig(os.path.join(out, name))
    describe(name, fig)
    plt.close(fig)


def chart_accuracy(rep, out):
    plt = plt_setup()
    rows = [r for r in rep["accuracy"] if r.get("kld") is not None and r.get("bytes_per_weight")]
    fig, ax = plt.subplots(figsize=(7, 4.8))
    ax.scatter([r["bytes_per_weight"] for r in rows], [r["kld"] for r in rows], s=50, color=COLORS["plainllama"],
               label="plainllama, quantized at load")
    for r in rows:
        ax.annotate(f"{r['format']}\nsame top {100 * r['same_top']:.1f}%", (r["bytes_per_weight"], r["kld"]),
                    textcoords="offset points", xytext=(6, 4), fontsize=8)
    if rows and min(r["kld"] for r in rows) > 0:
        import matplotlib.ticker as ticker
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("bytes per weight as loaded (all weights, embeddings included)")
    ax.set_ylabel("mean KL divergence from the unquantized model (nats)")
    ax.set_title("Accuracy lost per format")
    if rows:
        xs = [r["bytes_per_weight"] for r in rows]
        ax.set_xlim(min(xs) * 0.85, max(xs) * 1.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "accuracy_kld.png"))
    describe("accuracy_kld.png", fig, [{"points": [r["format"] for r in rows], "bar_labels": []}])
    plt.close(fig)


def chart_serving(rep, out):
    plt = plt_setup()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    panels = [("tokens_per_s", "aggregate generated tokens/s", "Throughput"),
              ("ttft_ms_median", "time to first token, median (ms)", "Time to first token"),
              ("latency_ms_p95", "request latency, p95 (ms)", "Latency, p95")]
    for ax, (key, ylabel, title) in zip(axes, panels):
        for engine in dict.fromkeys(r["engine"] for r in rep["serving"]):
            rows = sorted((r for r in rep["serving"] if r["engine"] == engine and r.get(key) is not None),
                          key=lambda r: r["concurrency"])
            ax.plot([r["concurrency"] for r in rows], [r[key] for r in rows], marker="o",
                    color=COLORS.get(engine, "#888"), label=engine)
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(CONCURRENCY))
        ax.set_xticklabels([str(k) for k in CONCURRENCY])
        ax.set_xlabel("concurrent streams")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "serving.png"))
    describe("serving.png", fig)
    plt.close(fig)


def ratio_bars(out, name, groups, title, xlabel):
    """groups: [(label, {measure: ratio})]: one horizontal bar per (label, measure), coloured by measure, on a
    logarithmic axis with a line at 1, each bar labelled with its ratio."""
    plt = plt_setup()
    rows = [(g, k, v) for g, d in groups for k, v in d.items() if v is not None and v > 0]
    measures = list(dict.fromkeys(k for _, k, _ in rows))
    palette = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.28 * max(1, len(rows))))
    ys = list(range(len(rows)))[::-1]
    for m_i, m in enumerate(measures):
        sel = [(y, v) for y, (_, k, v) in zip(ys, rows) if k == m]
        bars = ax.barh([y for y, _ in sel], [v for _, v in sel], height=0.7, color=palette[m_i % len(palette)],
                       label=m)
        ax.bar_label(bars, labels=[f"{v:.2f}" for _, v in sel], fontsize=8, padding=2)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    import matplotlib.ticker as ticker
    vals = [v for _, _, v in rows] or [1.0]
    lo, hi = min(vals + [1.0]) / 1.5, max(vals + [1.0]) * 1.8
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(ticker.FixedLocator([2.0 ** e for e in range(-10, 11) if lo <= 2.0 ** e <= hi]))
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{g}: {k}" for g, k, _ in rows], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("format or concurrency: measure")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="measure", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name))
    describe(name, fig)
    plt.close(fig)


def ratio_groups(num, den, formats):
    """Ratios num / den, each side a (report, engine): per format, pp and tg per depth and perplexity; then per
    concurrency level, the serving figures. A list of (group, {measure: ratio})."""
    def row(side, part, **key):
        rep, engine = side
        return next((r for r in rep[part] if r["engine"] == engine and all(r[k] == v for k, v in key.items())), None)

    groups = []
    for f in formats:
        d = {}
        for n in (r for r in num[0]["speed"] if r["engine"] == num[1] and r["format"] == f):
            m = row(den, "speed", format=f, depth=n["depth"])
            for k in ("pp", "tg"):
                if m and m.get(k + "_tok_s") and n.get(k + "_tok_s"):
                    d[f"{k} @ depth {n['depth']} (tokens/s)"] = n[k + "_tok_s"] / m[k + "_tok_s"]
        n, m = row(num, "accuracy", format=f), row(den, "accuracy", format=f)
        if n and m:
            d["perplexity"] = n["ppl"] / m["ppl"]
        if d:
            groups.append((f, d))
    for k in CONCURRENCY:
        n, m = row(num, "serving", concurrency=k), row(den, "serving", concurrency=k)
        if n and m and m["tokens_per_s"]:
            groups.append((f"serving x{k}", {"aggregate tokens/s": n["tokens_per_s"] / m["tokens_per_s"],
                                             "p95 latency": n["latency_ms_p95"] / m["latency_ms_p95"]
                                             if m.get("latency_ms_p95") else None}))
    return groups


def side_by_side_groups(rep):
    """Ratios plainllama / llama.cpp per GGUF format (ratio_groups)."""
    formats = dict.fromkeys(r["format"] for r in rep["speed"] if r["engine"] == "llama.cpp")
    return ratio_groups((rep, "plainllama"), (rep, "llama.cpp"), formats)


def num(v, f="{:.2f}"):
    return "—" if v is None else f.format(v)


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" if i == 0 else "---:"
                                                                  for i in range(len(header))) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(rep, out):
    os.makedirs(out, exist_ok=True)
    m = rep["meta"]
    s = rep["settings"]
    md = ["# Performance", "",
          f"Produced by `{m['command']}` on {m['date']}, commit `{m['commit']}`.", "",
          f"- CPU: {m['cpu']} ({m['cpus']} logical CPUs); threads: {m['threads']}",
          f"- read bandwidth (bench's streaming-read test, median of its runs): {num(m['bandwidth_gb_s'], '{:.1f}')}"
          f" GB/s; FMA peak (bench, all threads): {num(m['fma_peak_gflops'], '{:.1f}')} GFLOP/s",
          f"- {'quick run: the shared small models' if m['quick'] else 'full run'}; the machine may have been busy"
          " (other processes are not stopped)", ""]
    if rep["speed"]:
        md += ["## Speed", "",
               f"`plainllama bench` on {rep['speed_model']}: pp{s['p']} and tg{s['n']}, {s['reps']} runs each, at "
               f"each depth (tokens already in the cache). tg's share is of the read bandwidth measured in the same "
               f"run; pp's of the FMA peak measured in the same run (quantized formats multiply in 8-bit integers "
               f"and BF16 in pairs, so their pp share of the f32 peak may pass 100%; so may tg's for a model that "
               f"fits in the caches)."
               + (" Each format is a GGUF file that `plainllama quantize` wrote from it, the same file through "
                  "llama-bench." if s.get("make_ggufs") else ""), ""]
        rows = [[r["engine"], r["format"], r["threads"], r["depth"], num(r.get("pp_tok_s")), num(r.get("pp_stdev")),
                 num(r.get("pp_share"), "{:.0%}"), num(r.get("tg_tok_s")), num(r.get("tg_stdev")),
                 num(r.get("tg_share"), "{:.0%}")] for r in rep["speed"]]
        md += [md_table(["engine", "format", "threads", "depth", "pp tokens/s", "± stdev",
                         "pp share of FMA peak",
                         "tg tokens/s", "± stdev", "tg share of read bandwidth"], rows), "",
               "![tg tokens/s by format](speed_tg.png)", "", "![pp tokens/s by format](speed_pp.png)", ""]
    if rep["accuracy"]:
        md += ["## Accuracy", "",
               f"`plainllama perplexity --kl-divergence` on {show(rep['accuracy_model'])} and {show(rep['text'])}: "
               f"{s['ppl_chunks']} chunks of {s['ppl_ctx']} tokens. KLD and same top token against the unquantized "
               "model in the same run; F16 and BF16 copies give perplexity alone.", ""]
        rows = [[r["engine"], r["format"], num(r.get("bytes_per_weight"), "{:.3f}"), num(r["ppl"], "{:.4f}"),
                 num(r.get("ppl_stderr"), "{:.4f}"), num(r.get("kld"), "{:.6f}"),
                 num(r.get("same_top"), "{:.2%}")]
                for r in rep["accuracy"]]
        md += [md_table(["engine", "format", "bytes/weight", "PPL", "± stderr", "mean KLD", "same top token"], rows),
               "", "![bytes per weight against KLD](accuracy_kld.png)", ""]
    if rep["serving"]:
        md += ["## Serving", "",
               f"`scripts/loadgen.py` against `serve` on {show(rep['serve_model'])}: "
               f"{s['requests_per_stream']} streamed chat completions per stream, max_tokens {s['max_tokens']}, "
               "prompts of about 32 tokens.", ""]
        rows = [[r["engine"], r["concurrency"], r["requests"], r["errors"], num(r["tokens_per_s"], "{:.1f}"),
                 num(r["ttft_ms_median"], "{:.1f}"), num(r["ttft_ms_p95"], "{:.1f}"),
                 num(r["latency_ms_median"], "{:.1f}"), num(r["latency_ms_p95"], "{:.1f}")] for r in rep["serving"]]
        md += [md_table(["engine", "streams", "requests", "errors", "tokens/s", "TTFT median ms", "TTFT p95 ms",
                         "latency median ms", "latency p95 ms"], rows), "",
               "![serving against concurrency](serving.png)", ""]
    groups = side_by_side_groups(rep)
    if groups:
        md += ["## Side by side with llama.cpp", "",
               "The same GGUF files through llama-bench, llama-perplexity and llama-server, each measurement in turn "
               "with ours. Ratios are plainllama / llama.cpp (tokens/s: above 1 is faster; perplexity and latency: "
               "1 is the same, below 1 is lower).", ""]
        rows = [[g, k, num(v, "{:.3f}")] for g, d in groups for k, v in d.items()]
        md += [md_table(["format", "measure", "plainllama / llama.cpp"], rows), "",
               "![plainllama / llama.cpp](llama_cpp_ratio.png)", ""]
    if rep["notes"]:
        md += ["## Notes", ""] + [f"- {n}" for n in rep["notes"]] + [""]
    md += ["Raw figures: report.json. Compare two reports with "
           "`scripts/report.py --compare A/report.json B/report.json -o OUT`.", ""]
    draw(rep, out)
    rep["charts"] = CHARTS
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(rep, f, indent=1)


def draw(rep, out):
    if rep["speed"]:
        chart_speed(rep, out, "tg_tok_s", "tg_share", "Generation (tg) speed", "tokens/s (one stream)",
                    "read bandwidth")
        chart_speed(rep, out, "pp_tok_s", "pp_share", "Prompt processing (pp) speed", "tokens/s", "FMA peak")
    if rep["accuracy"]:
        chart_accuracy(rep, out)
    if rep["serving"]:
        chart_serving(rep, out)
    groups = side_by_side_groups(rep)
    if groups:
        ratio_bars(out, "llama_cpp_ratio.png", groups, "plainllama / llama.cpp on the same GGUF files",
                   "ratio, plainllama / llama.cpp (log scale; tokens/s above 1: plainllama faster)")
