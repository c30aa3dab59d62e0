#!/usr/bin/env python3
"""Draws latency-by-percentile curves of several .hgrm files on one PNG, with gnuplot.

  scripts/plot-latency.py -o OUT.png [-t TITLE] FILE.hgrm[=LABEL]...

Each FILE is a percentile distribution in HdrHistogram's text format (bench_client --hgrm,
wrk2 --latency, HdrHistogram's outputPercentileDistribution), values in microseconds. One
curve per file, labelled LABEL (default: the file name without .hgrm). The x axis is the
percentile on HdrHistogram's scale, 1/(1-p) logarithmic, so that 90, 99, 99.9, 99.99 and
99.999 % are equally spaced; the y axis is the latency, logarithmic. The same picture as
HdrHistogram's plotFiles.html, without a browser.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

TICKS = [(1, "0%"), (10, "90%"), (100, "99%"), (1e3, "99.9%"), (1e4, "99.99%"), (1e5, "99.999%")]


def read_hgrm(path):
    """(x = 1/(1-percentile), value) of every percentile line below 100 %, and the max."""
    points = []
    maximum = None
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 3 or line.startswith("#"):
                if line.startswith("#[Max"):
                    try:
                        maximum = float(line.split("=")[1].split(",")[0])
                    except (IndexError, ValueError):
                        pass
                continue
            try:
                value, percentile = float(fields[0]), float(fields[1])
            except ValueError:
                continue  # the header
            if percentile >= 1.0:
                maximum = value if maximum is None else max(maximum, value)
                continue
            points.append((1.0 / (1.0 - percentile), value))
    return points, maximum


def gnuplot_text(text):
    return text.replace("\\", "\\\\").replace('"', '\\"')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("-t", "--title", default="Latency by percentile")
    parser.add_argument("files", nargs="+", help="FILE.hgrm or FILE.hgrm=LABEL")
    args = parser.parse_args()

    curves = []
    for spec in args.files:
        # The path ends in .hgrm; a label may itself hold "=" (ucp+event_loop.busy_poll_us=50).
        path, sep, label = spec.partition(".hgrm=")
        path = path + ".hgrm" if sep else spec
        if not label:
            label = os.path.basename(path)[:-5] if path.endswith(".hgrm") else os.path.basename(path)
        points, maximum = read_hgrm(path)
        if not points:
            print(f"plot-latency: {path}: no percentile lines", file=sys.stderr)
            continue
        curves.append((label, points, maximum))
    if not curves:
        sys.exit("plot-latency: nothing to plot")

    with tempfile.TemporaryDirectory() as scratch:
        plots = []
        top_x = 1e5
        for i, (label, points, maximum) in enumerate(curves):
            data = os.path.join(scratch, f"{i}.dat")
            with open(data, "w") as f:
                for x, y in points:
                    f.write(f"{x} {y}\n")
            top_x = max(top_x, points[-1][0])
            key = f"{label} (max {maximum:.0f} us)" if maximum is not None else label
            plots.append(f"'{data}' using 1:2 with lines linewidth 2 title \"{gnuplot_text(key)}\"")
        # Tic labels are formats for gnuplot: a literal % is %%.
        xtics = ", ".join(f'"{name.replace("%", "%%")}" {x:g}' for x, name in TICKS)
        script = f"""set terminal pngcairo size 1100,650 font ',10' noenhanced
set output '{args.output}'
set title "{gnuplot_text(args.title)}"
set logscale x
set logscale y
set xrange [1:{10 ** math.ceil(math.log10(top_x)):g}]
set xtics ({xtics})
set xlabel 'percentile'
set ylabel 'latency (us)'
set format y '%g'
set grid xtics ytics mytics
set key top left
plot {", ".join(plots)}
"""
        result = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if result.returncode != 0:
            sys.exit(f"plot-latency: gnuplot failed: {result.stderr.strip()}")


if __name__ == "__main__":
    main()
