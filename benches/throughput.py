"""Throughput benchmark entry point: `python benches/throughput.py [zarrpipe bench options]`.

A thin wrapper over `zarrpipe bench` (zarrpipe/bench/ holds the harness); see BENCHMARKS.md.
"""

import sys

from zarrpipe.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
