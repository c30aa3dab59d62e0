#!/usr/bin/env python3
"""Draws the three-panel benchmark plots of ./benchmark.sh with gnuplot.

  scripts/plot-bench.py DAT PNG TITLE SERVER...    one plot from a .dat file benchmark.sh wrote
  scripts/plot-bench.py --from-report REPORT.md...  redraws every plot a report links, from
                                                    the medians in its tables

A .dat file holds one gnuplot index block per server, in SERVER order, with lines
"connections QPS p99_us req_per_cpu_s". The panels are requests/s, requests per server-CPU-second
and p99 latency over connections; the legend sits below them, never over the data.
"""
import math
import os
import re
import subprocess
import sys
import tempfile


def plot(dat, png, title, servers):
    longest = max((len(s) for s in servers), default=10)
    # The key belongs to the first panel, so its columns share that panel's width (~64 chars).
    columns = max(1, min(len(servers), 64 // (longest + 8)))
    rows = math.ceil(len(servers) / columns)
    height = 430 + 18 * rows
    bottom = (60 + 18 * rows) / height  # the panels end here; the legend fills the space below

    def series(column):
        return ", ".join(f"'{dat}' index {i} using 1:{column} with linespoints title '{s}'"
                         for i, s in enumerate(servers))

    script = f"""set terminal pngcairo size 1500,{height} font ',10' noenhanced
set output '{png}'
set multiplot layout 1,3 title '{title}' margins 0.06,0.975,{bottom:.3f},0.90 spacing 0.07,0
set logscale x
set xlabel 'connections'
set grid
set key at screen 0.06,0.01 left bottom horizontal Left reverse maxcols {columns} width 2 samplen 3
set ylabel 'requests/s'
set yrange [0:*]
plot {series(2)}
unset key
set ylabel 'requests per server-CPU-second'
plot {series(4)}
set logscale y
set ylabel 'p99 latency (us)'
set yrange [*:*]
plot {series(3)}
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)


def from_report(report):
    """Redraws each plot of a benchmark.sh report from its tables (the plotted medians)."""
    directory = os.path.dirname(os.path.abspath(report))
    lines = open(report).read().splitlines()
    stamp = None
    rows = []  # (connections, server, qps, p99, rps) of the table being read
    drawn = []
    for line in lines:
        if line.startswith("# UCP benchmark report: "):
            stamp = line.split(": ", 1)[1].strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and len(cells) > 5 and cells[0].isdigit():
            rows.append((int(cells[0]), cells[1], cells[2], cells[3], cells[4]))
            continue
        image = re.match(r"!\[(.*)\]\((.*\.png)\)", line)
        if image and rows:
            title, png = image.group(1), os.path.join(directory, image.group(2))
            servers = list(dict.fromkeys(r[1] for r in rows))
            with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
                for server in servers:
                    dat.write(f"# {server}\n")
                    for conns, name, qps, p99, rps in rows:
                        if name == server:
                            dat.write(f"{conns} {qps.replace('–', 'NaN')} {p99.replace('–', 'NaN')} "
                                      f"{rps.replace('–', 'NaN')}\n")
                    dat.write("\n\n")
            plot(dat.name, png, f"{title} ({stamp})", servers)
            os.unlink(dat.name)
            drawn.append(png)
            rows = []
    return drawn


def main(argv):
    if len(argv) >= 2 and argv[1] == "--from-report":
        for report in argv[2:]:
            for png in from_report(report):
                print(png)
        return 0
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    plot(argv[1], argv[2], argv[3], argv[4:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
