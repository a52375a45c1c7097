"""The sections of BENCHMARKS.md that a benchmark script owns, between its markers.

    <!-- NAME:begin -->
    ...
    <!-- NAME:end -->

scripts/bench sink, scripts/bench process and scripts/bench scale each replace their own section of the report
(appended when the file has none); scripts/bench peers rewrites the whole file but keeps
these sections (SECTIONS).
"""
import os

# The sections other scripts own in the file bench-peers writes.
SECTIONS = ("bench-sink", "bench-process", "bench-peers-steady", "rust-peers", "join", "latency-rates", "bench-grid",
            "bench-scale", "brokers", "bench-exporter")


def markers(name):
    return "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name


def extract(text, name):
    """The section NAME of text, markers included, or None."""
    begin, end = markers(name)
    b, e = text.find(begin), text.find(end)
    return text[b:e + len(end)] if 0 <= b < e else None


def write(path, name, body):
    """Replaces section NAME of the file at path with body (the text between the markers),
    or appends it; creates the file (and its directory) if need be."""
    begin, end = markers(name)
    section = begin + "\n" + body.strip("\n") + "\n\n" + end
    text = open(path).read() if os.path.exists(path) else ""
    b, e = text.find(begin), text.find(end)
    if 0 <= b < e:
        text = text[:b] + section + text[e + len(end):]
    elif text:
        text = text.rstrip() + "\n\n" + section + "\n"
    else:
        text = section + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    open(path, "w").write(text)
