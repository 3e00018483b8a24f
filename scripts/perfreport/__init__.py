"""The parts of scripts/report.py, which parses the flags and calls them, in the order a run uses them:

- common: the project's paths, the formats and concurrency levels measured, Fail and die, how a path is printed
- run: commands run for their output or their JSON, and the progress line
- models: F16 and BF16 copies of a model folder, and each format's (folder, --quant)
- measure: each measurement (plainllama's and llama.cpp's tools), the plan of a run and the run itself
- charts: the charts and tables, written as report.md, PNG files and report.json
- compare: the ratios of two reports (--compare)
"""
