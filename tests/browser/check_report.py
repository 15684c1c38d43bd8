#!/usr/bin/env python3
"""Opens an aegis HTML report in headless Chromium and checks that it really renders.

    check_report.py --aegis BUILD/apps/aegis/aegis --source-dir REPO   # makes the report
    check_report.py --report FILE.html                                 # checks a given one

Fails (exit 1) if the page logs anything to the console (a script error, a blocked
load: the report has no script and its Content-Security-Policy blocks every load), if the
rendered DOM lacks a chart kind, or if the screenshot is blank. Exits 77, which ctest
reports as skipped, when Chromium is not installed. Standard library only.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
CHART_KINDS = ("bars", "cdf", "queue", "timeline", "memory")
# The first three policy colours of the report: bars and legend swatches of exclusive,
# aegis and naive must be on screen, not just any ink.
POLICY_RGB = ((0x4E, 0x79, 0xA7), (0xF2, 0x8E, 0x2B), (0x59, 0xA1, 0x4F))
WINDOW = "1400,3000"
TIMEOUT_S = 180


def fail(msg):
    print(f"check_report: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def find_chromium(explicit):
    for name in (explicit, os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def make_report(aegis, source_dir, out):
    cmd = [aegis, "sim", "--workloads", "data/aegis/workloads.csv", "--trace", "data/aegis/trace_philly.csv",
           "--policies", "exclusive,aegis,naive", "--report", out]
    run = subprocess.run(cmd, cwd=source_dir, capture_output=True, text=True, timeout=TIMEOUT_S)
    if run.returncode != 0:
        fail(f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout}{run.stderr}")


def chromium(binary, url, extra, workdir):
    """Runs headless Chromium once; returns (stdout, console lines)."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=workdir)
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
           f"--window-size={WINDOW}", *extra, url]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        fail(f"chromium did not finish within {TIMEOUT_S} s")
    if run.returncode != 0:
        fail(f"chromium exited {run.returncode}:\n{run.stderr[-4000:]}")
    # Page console messages, uncaught errors included, are logged as "...:CONSOLE:<line>] ...".
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    return run.stdout, console


def check_dom(dom):
    for kind in CHART_KINDS:
        if not re.search(rf'<svg class="chart {kind}"', dom):
            fail(f"the rendered page has no '{kind}' chart")
    if "<h1>" not in dom:
        fail("the rendered page has no title")
    return {kind: len(re.findall(rf'<svg class="chart {kind}"', dom)) for kind in CHART_KINDS}


def png_rows(path):
    """Decodes an 8-bit RGB or RGBA, non-interlaced PNG; yields each row's bytes and pixel size."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        fail(f"unexpected PNG format (depth {depth}, colour type {colour}, interlace {interlace})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        unfilter(kind, line, prev, bpp)
        yield line, bpp, width, height
        prev = line


def unfilter(kind, line, prev, bpp):
    n = len(line)
    if kind == 1:
        for i in range(bpp, n):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:
        line[:] = bytes((a + b) & 0xFF for a, b in zip(line, prev))
    elif kind == 3:
        for i in range(n):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pred) & 0xFF
    elif kind != 0:
        fail(f"unknown PNG filter {kind}")


def check_screenshot(path):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        fail("chromium wrote no screenshot")
    total = ink = 0
    colours = set()
    policy_px = [0] * len(POLICY_RGB)
    for line, bpp, width, height in png_rows(path):
        for x in range(0, width * bpp, 2 * bpp):  # every other pixel is plenty
            rgb = (line[x], line[x + 1], line[x + 2])
            total += 1
            if min(rgb) < 240:
                ink += 1
            colours.add(rgb)
            for k, want in enumerate(POLICY_RGB):
                if all(abs(c - w) <= 3 for c, w in zip(rgb, want)):
                    policy_px[k] += 1
    size = f"{width}x{height}"
    if ink < 0.03 * total:
        fail(f"the screenshot ({size}) is blank: {100 * ink / total:.2f} % of pixels are not white")
    if len(colours) < 50:
        fail(f"the screenshot ({size}) has only {len(colours)} colours")
    if min(policy_px) < 200:
        fail(f"the policy colours are missing from the screenshot: {policy_px} pixels of {POLICY_RGB}")
    return f"{size}, {100 * ink / total:.1f} % ink, {len(colours)} colours, policy pixels {policy_px}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", help="an existing report to check")
    ap.add_argument("--aegis", help="the aegis binary, to make the report of the published Philly sample")
    ap.add_argument("--source-dir", help="repository root (for --aegis)")
    ap.add_argument("--chromium", help="browser binary (default: chromium on PATH, or $CHROMIUM)")
    ap.add_argument("--keep", help="copy the screenshot here")
    args = ap.parse_args()
    if not args.report and not (args.aegis and args.source_dir):
        ap.error("give --report FILE, or --aegis BIN and --source-dir DIR")

    browser = find_chromium(args.chromium)
    if not browser:
        print("check_report: SKIP: Chromium is not installed (Debian: apt-get install chromium; "
              "scripts/deps.sh installs it)")
        return SKIP

    with tempfile.TemporaryDirectory(prefix="aegis-browser-") as work:
        report = os.path.abspath(args.report) if args.report else os.path.join(work, "report.html")
        if not args.report:
            make_report(args.aegis, args.source_dir, report)
        if not os.path.exists(report):
            fail(f"{report}: no such file")
        url = "file://" + report
        dom, console = chromium(browser, url, ["--dump-dom"], work)
        shot = os.path.join(work, "shot.png")
        _, console2 = chromium(browser, url, [f"--screenshot={shot}"], work)
        if console or console2:
            fail("the page logged to the console:\n" + "\n".join(console + console2))
        charts = check_dom(dom)
        pixels = check_screenshot(shot)
        if args.keep:
            shutil.copy(shot, args.keep)
    print(f"check_report: OK: {report if args.report else 'report of trace_philly'}: charts {charts}; "
          f"screenshot {pixels}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
