// Parses a Prometheus text exposition (stdin) with parse-prometheus-text-format and prints its families as JSON:
// [{name, help, type, metrics: [{labels, value} or {labels, buckets, count, sum}]}]. Run by
// tests/test_server_metrics.py.
import fs from "node:fs";
import parse from "parse-prometheus-text-format";

process.stdout.write(JSON.stringify(parse(fs.readFileSync(0, "utf8"))));
