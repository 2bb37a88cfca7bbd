#!/usr/bin/env python3
"""Checks that files are well-formed XML (the SVG heatmaps and the HTML pages qkv writes), and
that every heatmap cell has a tooltip: python3 check_xml.py FILE..."""
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
failures = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        print(f"FAIL {path}: not well-formed XML: {e}")
        failures += 1
        continue
    svgs = [root] if root.tag == SVG + "svg" else list(root.iter(SVG + "svg"))
    cells = [r for s in svgs for g in s.iter(SVG + "g") if g.get("class") == "panel" for r in g.iter(SVG + "rect")]
    untitled = [r for r in cells if r.find(SVG + "title") is None]
    if not svgs or not cells or untitled:
        print(f"FAIL {path}: {len(svgs)} svg, {len(cells)} cells, {len(untitled)} without a tooltip")
        failures += 1
        continue
    print(f"ok   {path}: {root.tag.split('}')[-1]}, {len(svgs)} svg, {len(cells)} cells with tooltips")
sys.exit(1 if failures else 0)
