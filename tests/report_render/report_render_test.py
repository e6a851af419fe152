"""The HTML and JUnit reports of real runs of the built binary (docs/cli.md "HTML and JUnit
reports"), in three groups, each registered as its own CTest test (the group is argv[1]):

  junit   every `ncert demo` dump checked, the demo's logits pair compared, its three fork pairs
          forked (with a vocabulary), its good dump witnessed and inspected, a small sweep, a
          refused input and a dump whose projection is named with markup, quotes, a control
          character and invalid UTF-8, each with --json and --junit: the JUnit file is XML 1.0
          that junit-10.xsd accepts (lxml's XML Schema validator), junitparser reads it, and its testcase,
          failure, error and skipped counts, messages and input properties equal the JSON
          report's; the bound evidence behind the HTML plots adds up (histograms count every
          value, failure maps every value outside).
  html    the HTML reports of those runs (and of a campaign over the demo's dumps) opened in
          headless Chromium (DevTools over a pipe): the summary comes first with one row per part
          (a campaign's entry, a command's subject), failing parts first; failing parts are open
          and come before the passing ones, collapsed; the first failing check row precedes the
          first passing one; no plot of a page without failures draws in red or orange; ids in a
          narrowed page wrap only after a '/'; the rendered DOM shows the JSON's verdict and
          number of failing checks, one
          |y - y*| / B histogram per output of every projection's bound check (a failure map
          where values lie outside, the first failure in full), two margin histograms per
          witness run, three series plots and a percentiles table per compared run, both
          sides' top-5 per fork; the failures-only filter works without script; the screenshot
          is not blank; the page requests nothing but itself, logs no Content-Security-Policy
          violation, and its HTML holds no script, URL, src or href.
  size    a compare of two 2-run dumps of 6,000 rows each writes an HTML page under 2 MB with
          every series capped at 512 points (500 points of 12 rows); HTML and JUnit are byte-identical at 1 and 2
          threads; --html and --junit are refused (exit 2) where --json would be, and when two
          reports name the same file.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "common"))

import chromium_cdp  # noqa: E402
import ncert_testing  # noqa: E402

NCERT = os.environ.get("NCERT_BINARY", "")
XSD = os.path.join(HERE, "junit-10.xsd")

from lxml import etree as lxml_etree  # noqa: E402  (Debian's python3-lxml: libxml2's XSD validator)

_SCHEMA = None


def xsd_schema():
    """junit-10.xsd compiled once by libxml2."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = lxml_etree.XMLSchema(lxml_etree.parse(XSD))
    return _SCHEMA


# A projection name (HDF5 names hold any byte but "/"): markup, quotes, a terminal escape and
# bytes that are not UTF-8; as the JSON report carries it, and as the pages print it.
HOSTILE = b"p<script>alert(\"x\")'&\x1b[2J\xff\xfe"
HOSTILE_JSON = "p<script>alert(\"x\")'&\x1b[2J\\xff\\xfe"
HOSTILE_TEXT = "p<script>alert(\"x\")'&\\x1b[2J\\xff\\xfe"
FAULTS = ["wrong-row-scattered", "slots-swapped", "stale-compact-slot", "padding-clobbered",
          "unselected-row-written", "dropped-k-tile-packed", "bf16-truncation-packed", "af4-scale-x2",
          "nibble-order-swapped", "nan-output"]
FORK_KINDS = ["near-tie", "unexplained", "invalid"]


def scratch(name):
    return ncert_testing.scratch(name, "render")


def run(args, expect=None):
    p = subprocess.run([NCERT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if expect is not None and p.returncode not in expect:
        raise AssertionError("`ncert %s` exited %d (expected %s)\n%s\n%s" % (
            " ".join(args), p.returncode, expect, p.stdout.decode(errors="replace")[-2000:],
            p.stderr.decode(errors="replace")[-2000:]))
    return p


class Runs:
    """The runs every group looks at, made once per process: name -> (json, html, junit)."""

    def __init__(self, root):
        self.root = root
        demo = os.path.join(root, "demo")
        run(["demo", "--dir", demo, "--quiet"], expect=(0,))
        self.demo = demo
        vocab = os.path.join(root, "vocab.json")
        tokens = ["t%d" % i for i in range(4096)]
        tokens[497] = "<b>bold</b> & \"q\""  # the near-tie fork's tokens, rendered as text
        tokens[1905] = "\x1b[31m\u00e9"
        with open(vocab, "w") as f:
            json.dump(tokens, f)
        self.runs = {}
        d = lambda name: os.path.join(demo, name + ".h5")  # noqa: E731
        for name in ["good"] + FAULTS:
            self.add("check-" + name, ["check", d(name)])
        self.add("campaign", ["campaign", self.campaign_manifest(root)])
        self.add("compare", ["compare", d("logits-a"), d("logits-b")])
        for kind in FORK_KINDS:
            self.add("forks-" + kind, ["forks", d("fork-%s-a" % kind), d("fork-%s-b" % kind), "--vocab", vocab])
        self.add("witness", ["witness", d("good")])
        self.add("inspect", ["inspect", d("good")])
        self.add("sweep", ["sweep", "--filter", "fmt=af4c,K=32"])
        garbage = os.path.join(root, "garbage.h5")
        with open(garbage, "wb") as f:
            f.write(b"not an HDF5 file, " * 100)
        self.add("refused", ["check", garbage], expect=(3,))
        self.hostile = self.hostile_dump()
        self.add("hostile", ["check", self.hostile], expect=(0, 1, 3))

    def campaign_manifest(self, root):
        """A campaign of the demo's dumps: a good and a faulty check, a failing compare, a passing
        fork pair and a witness run."""
        path = os.path.join(root, "manifest.json")
        d = lambda name: os.path.join("demo", name + ".h5")  # noqa: E731
        entries = [{"id": "good", "check": d("good")}, {"id": "af4-scale-x2", "check": d("af4-scale-x2")},
                   {"id": "logits", "compare": [d("logits-a"), d("logits-b")]},
                   {"id": "fork-near-tie", "forks": [d("fork-near-tie-a"), d("fork-near-tie-b")]},
                   {"id": "witness-good", "witness": d("good")}]
        with open(path, "w") as f:
            json.dump({"ncert_campaign": 1, "name": "demo", "entries": entries}, f)
        return path

    def add(self, name, args, expect=(0, 1)):
        paths = tuple(os.path.join(self.root, name + ext) for ext in (".json", ".html", ".xml"))
        run(args + ["--json", paths[0], "--html", paths[1], "--junit", paths[2]], expect=expect)
        self.runs[name] = paths

    def hostile_dump(self):
        import h5py
        p = os.path.join(self.root, "hostile.h5")
        shutil.copyfile(os.path.join(self.demo, "good.h5"), p)
        with h5py.File(p, "r+") as f:
            f.move(b"projections/attn_qkv", b"projections/" + HOSTILE)
        return p

    def json(self, name):
        with open(self.runs[name][0], encoding="utf-8") as f:
            return json.load(f)


_RUNS = None


def runs():
    global _RUNS
    if _RUNS is None:
        _RUNS = Runs(scratch("runs"))
    return _RUNS


def expected_counts(report):
    """(tests, failures, errors, skipped) of a JSON report, as the JUnit file must hold them."""
    checks = report["checks"]
    errors = 1 if "error" in report else 0
    failed = sum(c["verdict"] == "FAIL" for c in checks)
    skipped = sum(c["verdict"] in ("SKIP", "N/A") for c in checks)  # N/A is <skipped type="not-applicable">
    return len(checks), failed - errors, errors, skipped


def printable(s):
    """The escaping of certify/report/printable.h for the strings these runs produce."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        elif 0x80 <= o < 0xA0:
            out.append("".join("\\x%02x" % b for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "".join(out)


def require_binary(test):
    ncert_testing.require_binary(test, NCERT)


# ---- junit --------------------------------------------------------------------------------------


class JUnitReports(unittest.TestCase):
    def setUp(self):
        require_binary(self)
        self.r = runs()

    def test_every_run_writes_valid_junit_with_the_json_counts(self):
        from junitparser import Error, Failure, JUnitXml, Skipped
        self.assertEqual(len(self.r.runs), 21)
        for name, (json_path, _, xml_path) in sorted(self.r.runs.items()):
            with self.subTest(run=name):
                report = self.r.json(name)
                with open(xml_path, "rb") as f:
                    raw = f.read()
                raw.decode("utf-8")  # strict
                ET.fromstring(raw)   # XML 1.0: expat refuses control characters and bad markup
                schema = xsd_schema()
                self.assertTrue(schema.validate(lxml_etree.parse(xml_path)), str(schema.error_log))
                suites = list(JUnitXml.fromfile(xml_path))
                self.assertEqual(len(suites), 1)
                suite = suites[0]
                self.assertEqual(suite.name, "ncert " + report["command"])
                tests, failures, errors, skipped = expected_counts(report)
                self.assertEqual((suite.tests, suite.failures, suite.errors, suite.skipped),
                                 (tests, failures, errors, skipped))
                cases = list(suite)
                self.assertEqual(len(cases), tests)
                kinds = {"failure": 0, "error": 0, "skipped": 0}
                for case, check in zip(cases, report["checks"]):
                    results = case.result
                    if check["verdict"] == "PASS":
                        self.assertEqual(results, [], check["id"])
                        continue
                    self.assertEqual(len(results), 1, check["id"])
                    res = results[0]
                    if isinstance(res, Error):
                        kinds["error"] += 1
                        self.assertEqual(res.message, printable(report["error"]["message"]))
                        self.assertEqual(res.type, report["error"]["name"])
                    elif isinstance(res, Failure):
                        kinds["failure"] += 1
                        self.assertEqual(check["verdict"], "FAIL")
                        self.assertEqual(res.message, printable(check["reason"]))
                        self.assertEqual(res.type, check["kind"])
                        self.assertIn("stats: {", res.text)
                    else:
                        self.assertIsInstance(res, Skipped)
                        kinds["skipped"] += 1
                        self.assertIn(check["verdict"], ("SKIP", "N/A"))
                        self.assertEqual(res.type, "not-applicable" if check["verdict"] == "N/A" else "unexpected")
                        self.assertEqual(res.message, printable(check["reason"]))
                self.assertEqual((kinds["failure"], kinds["error"], kinds["skipped"]), (failures, errors, skipped))
                props = {p.name: p.value for p in suite.properties()}
                self.assertEqual(props["ncert.command"], report["command"])
                self.assertEqual(props["ncert.verdict"], report["verdict"])
                for i, inp in enumerate(report["inputs"], 1):
                    self.assertEqual(props["input.%d.path" % i], printable(inp["path"]))
                    self.assertEqual(props["input.%d.xxh3_128" % i], inp["xxh3_128"])

    def test_testcases_are_named_after_subjects_and_checks(self):
        from junitparser import JUnitXml
        suite = list(JUnitXml.fromfile(self.r.runs["check-good"][2]))[0]
        names = [(c.classname, c.name) for c in suite]
        self.assertIn(("projections.attn_qkv", "bound"), names)
        self.assertIn(("projections.lm_head_greedy", "request-guards"), names)
        self.assertIn(("logits.greedy", "witness"), names)
        self.assertIn(("dump", "schema"), names)
        compare = list(JUnitXml.fromfile(self.r.runs["compare"][2]))[0]
        self.assertEqual([(c.classname, c.name) for c in compare], [("logits.greedy", "logits")])
        fork = list(JUnitXml.fromfile(self.r.runs["forks-near-tie"][2]))[0]
        self.assertEqual([(c.classname, c.name) for c in fork], [("forks.greedy", "16")])

    def test_a_refused_input_is_an_error_testcase(self):
        from junitparser import Error, JUnitXml
        suite = list(JUnitXml.fromfile(self.r.runs["refused"][2]))[0]
        self.assertEqual((suite.errors, suite.failures), (1, 0))
        errors = [r for c in suite for r in c.result if isinstance(r, Error)]
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0].type, "not-hdf5")

    def test_hostile_names_stay_text(self):
        _, html_path, xml_path = self.r.runs["hostile"]
        report = self.r.json("hostile")
        self.assertIn("projections/%s/bound" % HOSTILE_JSON, [c["id"] for c in report["checks"]])
        with open(xml_path, "rb") as f:
            raw = f.read()
        self.assertNotIn(b"\x1b", raw)
        self.assertNotIn(b"<script", raw)
        root = ET.fromstring(raw)
        classnames = [c.get("classname") for c in root.iter("testcase")]
        self.assertIn("projections." + HOSTILE_TEXT, classnames)
        with open(html_path, "rb") as f:
            html = f.read().decode("utf-8")
        self.assertNotIn("<script", html)
        self.assertNotIn("\x1b", html)
        self.assertIn("p&lt;script&gt;alert(&quot;x&quot;)&#39;&amp;\\x1b[2J\\xff\\xfe", html)

    def test_bound_evidence_adds_up(self):
        """The HTML's histograms count every value and its failure maps every value outside."""
        for name in ["good"] + FAULTS:
            report = self.r.json("check-" + name)
            for c in report["checks"]:
                if c["kind"] != "bound" or "outputs" not in c["stats"]:
                    continue
                for output, o in c["stats"]["outputs"].items():
                    with self.subTest(run=name, check=c["id"], output=output):
                        h = o["error_over_bound_histogram"]
                        total = h["zero"] + h["below"] + h["above"] + h["other"] + sum(h["counts"])
                        self.assertEqual(total, o["elements"])
                        self.assertEqual(h["other"], o["nonfinite"])  # every B of these dumps is > 0
                        # The largest ratio lies in the highest non-empty bin.
                        ratio = o["max_error_over_bound"]
                        if isinstance(ratio, float) and ratio > 0 and not h["above"]:
                            top = max(i for i, n in enumerate(h["counts"]) if n)
                            self.assertEqual(math.floor(math.log2(ratio)), h["log2_min"] + top)
                        if o["outside"]:
                            cells = [n for row in o["outside_grid"]["counts"] for n in row]
                            self.assertEqual(sum(cells), o["outside"])
                        else:
                            self.assertNotIn("outside_grid", o)


# ---- html ---------------------------------------------------------------------------------------

# Facts of the rendered page, gathered in the browser after it has loaded.
DOM_FACTS = r"""
(() => {
  const all = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  // Chromium lays out a closed <details>' content (content-visibility: hidden) when asked for its
  // box, so a box alone does not say the element can be seen: checkVisibility() does.
  const visible = e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && (!e.checkVisibility || e.checkVisibility());
  };
  const h = document.getElementById('verdict');
  const nav = performance.getEntriesByType('navigation')[0];
  const facts = {
    load_ms: nav ? nav.loadEventEnd - nav.startTime : null,
    verdict: h ? h.dataset.verdict : null,
    failed: h ? Number(h.dataset.failed) : null,
    header_text: h ? h.textContent : '',
    check_rows: all('tr.check').length,
    failing_rows: all('tr.check.fail').length,
    coverage_rows: all('table.coverage tr').length,
    scripts: document.scripts.length,
    linked: all('[src],[href],link,iframe,object,embed,base').length,
    plots: all('svg.plot').length,
    projections: all('section.projection').map(s => ({
      subject: s.dataset.subject,
      hists: all('svg.bound-hist', s).map(e => e.dataset.output),
      bars: all('svg.bound-hist rect.bar', s).length,
      grids: all('svg.fail-grid', s).map(e => e.dataset.output),
      grid_cells: all('svg.fail-grid rect.cell', s).length,
      first_failure: all('table.first-failure', s).length,
    })),
    witnesses: all('section.witnesses').map(s => all('svg.margin-hist', s).length),
    tightest_rows: all('section.witnesses table.tightest tr').length,
    logits: all('section.logits').map(s => ({
      check: s.dataset.check,
      series: all('svg.series', s).length,
      lines: all('svg.series polyline, svg.series circle.point', s).length,
      percentiles: all('table.percentiles tr', s).length,
    })),
    forks: all('section.fork').map(s => ({
      check: s.dataset.check, cls: s.dataset.class,
      top_a: all('table.side-A tr', s).length, top_b: all('table.side-B tr', s).length,
      text: s.textContent,
    })),
    // The layout as the page opens: summary rows, parts (open or collapsed), what comes first.
    summary_rows: all('table.summary tr.part').map(r => ({part: r.dataset.part, verdict: r.dataset.verdict})),
    parts: all('details.part').map(d => ({part: d.dataset.part, verdict: d.dataset.verdict, open: d.open})),
    visible_check_rows: all('tr.check').filter(visible).length,
  };
  const follows = (a, b) => !!(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
  const summary = document.getElementById('summary'), inputs = document.getElementById('inputs');
  const firstFail = document.querySelector('tr.check.fail'), firstPass = document.querySelector('tr.check.pass');
  facts.summary_before_inputs = !!summary && follows(summary, inputs);
  facts.first_fail_before_first_pass = !firstFail || !firstPass || follows(firstFail, firstPass);
  const box = document.getElementById('only-failures');
  box.click();
  facts.visible_after_filter = all('tr.check').filter(visible).length;
  box.click();
  // Everything opened: every row and plot can be seen.
  all('details.part').forEach(d => { d.open = true; });
  facts.visible_after_unfilter = all('tr.check').filter(visible).length;
  facts.plots_drawn = all('svg.plot').every(visible);
  // Plot elements drawn in the failure red (#cf222e) or the warning orange (#d97706).
  const alarm = ['rgb(207, 34, 46)', 'rgb(217, 119, 6)'];
  facts.alarm_marks = all('svg.plot *').filter(e => {
    const cs = getComputedStyle(e);
    return alarm.includes(cs.fill) || alarm.includes(cs.stroke);
  }).length;
  // Ids in a narrow page: every line break inside an id cell falls right after a '/'.
  document.body.style.maxWidth = '520px';
  facts.id_wraps = 0;
  facts.id_bad_wraps = [];
  for (const td of all('td.id')) {
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    let prev = null, prevTop = null, node;
    while ((node = walker.nextNode())) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (!rects.length) continue;
        if (prevTop !== null && rects[0].top > prevTop + 2) {
          facts.id_wraps++;
          if (prev !== '/') facts.id_bad_wraps.push(td.textContent);
        }
        prev = node.data[i];
        prevTop = rects[0].top;
      }
    }
  }
  document.body.style.maxWidth = '';
  return facts;
})()
"""


LOAD_MS = []  # (milliseconds, page) of every page opened


class HtmlInBrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.browser = None
        binary = chromium_cdp.find_chromium()
        if binary and NCERT:
            cls.browser = chromium_cdp.Browser(binary, width=1200, height=900)

    @classmethod
    def tearDownClass(cls):
        if cls.browser:
            cls.browser.close()
        timed = sorted(t for t in LOAD_MS if t[0] is not None)
        if timed:
            print("\nChromium load time (navigation start to load event end) of %d pages: median %.1f ms, "
                  "max %.1f ms (%s)" % (len(timed), timed[len(timed) // 2][0], timed[-1][0], timed[-1][1]),
                  file=sys.stderr)

    def setUp(self):
        require_binary(self)
        if not self.browser:
            self.fail("Chromium is not installed (tools/install-deps installs Debian's chromium)")
        self.r = runs()

    def open(self, name):
        page = self.browser.open(self.r.runs[name][1], DOM_FACTS)
        return page, page.value, self.r.json(name)

    def assert_common(self, name, page, facts, report):
        LOAD_MS.append((facts["load_ms"], name))  # reported, never asserted (docs/performance.md)
        failing = sum(c["verdict"] == "FAIL" for c in report["checks"])
        self.assertEqual(facts["verdict"], report["verdict"])
        self.assertEqual(facts["failed"], failing)
        self.assertEqual(facts["check_rows"], len(report["checks"]))
        self.assertEqual(facts["failing_rows"], failing)
        if "error" in report:
            self.assertIn("input refused: error %s" % report["error"]["name"], facts["header_text"])
        elif failing:
            self.assertIn("%d of %d checks failed" % (failing, len(report["checks"])), facts["header_text"])
        self.assertEqual(facts["visible_after_filter"], failing)  # the CSS-only filter
        self.assertEqual(facts["visible_after_unfilter"], len(report["checks"]))
        # Summary first, failing parts first in it, open, and above the collapsed others.
        self.assertTrue(facts["summary_before_inputs"] or not report["checks"])
        verdicts = [r["verdict"] for r in facts["summary_rows"]]
        self.assertEqual(verdicts, sorted(verdicts, key=lambda v: v != "FAIL"))
        self.assertEqual([(p["part"], p["verdict"]) for p in facts["parts"]],
                         [(r["part"], r["verdict"]) for r in facts["summary_rows"]])
        self.assertEqual([p["open"] for p in facts["parts"]], [p["verdict"] == "FAIL" for p in facts["parts"]])
        self.assertTrue(facts["first_fail_before_first_pass"])
        if not failing:
            self.assertEqual(facts["visible_check_rows"], 0)  # every part collapsed
            self.assertEqual(facts["alarm_marks"], 0, "a page without failures draws in red or orange")
        self.assertEqual(facts["id_bad_wraps"], [], "ids wrap only after a '/'")
        self.assertEqual(facts["scripts"], 0)
        self.assertEqual(facts["linked"], 0)
        self.assertTrue(facts["plots_drawn"])
        self.assertEqual(page.requests, [page.url], "the page requested something else")
        self.assertEqual(page.messages, [], "console or CSP messages")
        colours = chromium_cdp.png_colours(page.png, rows=360)
        self.assertGreater(len(colours), 8, "the screenshot is blank")
        with open(self.r.runs[name][1], encoding="utf-8") as f:
            html = f.read()
        self.assertIn("http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';", html)
        for pattern in (r"<script", r"(?i)https?:", r"(?i)ftp:", r"\ssrc=", r"\shref=", r"<link", r"url\(",
                        r"@import", r"//[a-z0-9-]+\.[a-z]"):
            self.assertIsNone(re.search(pattern, html), "%s in %s" % (pattern, name))

    def test_check_pages(self):
        for name in ["good"] + FAULTS:
            with self.subTest(dump=name):
                page, facts, report = self.open("check-" + name)
                self.assert_common("check-" + name, page, facts, report)
                by_subject = {p["subject"]: p for p in facts["projections"]}
                subjects = sorted({c["id"].rsplit("/", 1)[0] for c in report["checks"]
                                   if c["id"].startswith("projections/")})
                self.assertEqual(sorted(by_subject), subjects)
                for c in report["checks"]:
                    if c["kind"] != "bound" or "outputs" not in c["stats"]:
                        continue
                    p = by_subject[c["id"].rsplit("/", 1)[0]]
                    outputs = list(c["stats"]["outputs"])
                    self.assertEqual(p["hists"], outputs, c["id"])  # one plot per output
                    self.assertGreater(p["bars"], 0)
                    with_grid = [o for o in outputs if c["stats"]["outputs"][o]["outside"] > 0]
                    self.assertEqual(p["grids"], with_grid, c["id"])
                    if with_grid:
                        self.assertGreater(p["grid_cells"], 0)
                    self.assertEqual(p["first_failure"], 1 if "first" in c["stats"] else 0, c["id"])
                witness_checks = [c for c in report["checks"] if c["kind"] == "witness" and "tokens" in c["stats"]]
                self.assertEqual(facts["witnesses"], [2] * len(witness_checks))

    def test_campaign_page(self):
        """The campaign's page: the summary's rows are its entries, failing ones first; the
        failing entries are open with their plots drawn in alarm colours, the passing ones
        collapsed; ids wrap (in the narrowed page) after '/' only."""
        page, facts, report = self.open("campaign")
        self.assert_common("campaign", page, facts, report)
        entries = [(e["id"], e["verdict"]) for e in report["entries"]]
        failing = [e for e in entries if e[1] == "FAIL"]
        self.assertEqual([e[0] for e in failing], ["af4-scale-x2", "logits"])
        self.assertEqual([(r["part"], r["verdict"]) for r in facts["summary_rows"]],
                         failing + [e for e in entries if e[1] != "FAIL"])
        self.assertGreater(facts["alarm_marks"], 0)  # the failing entries' maps and markers
        self.assertGreater(facts["id_wraps"], 0)
        self.assertEqual(len(facts["projections"]), 8)  # 4 projections in each of the two checked dumps
        self.assertEqual(len(facts["logits"]), 1)
        self.assertEqual(len(facts["forks"]), 1)

    def test_compare_page(self):
        page, facts, report = self.open("compare")
        self.assert_common("compare", page, facts, report)
        logits = [c for c in report["checks"] if c["kind"] == "logits"]
        self.assertEqual([x["check"] for x in facts["logits"]], [c["id"] for c in logits])
        for x in facts["logits"]:
            self.assertEqual(x["series"], 3)  # KL, max |d|, top-1 along the run
            self.assertEqual(x["lines"], 3)
            self.assertEqual(x["percentiles"], 3)  # header, KL, max |d|

    def test_fork_pages(self):
        for kind in FORK_KINDS:
            with self.subTest(fork=kind):
                page, facts, report = self.open("forks-" + kind)
                self.assert_common("forks-" + kind, page, facts, report)
                forks = [c for c in report["checks"] if c["kind"] == "fork"]
                self.assertEqual([(f["check"], f["cls"]) for f in facts["forks"]],
                                 [(c["id"], c["stats"]["class"]) for c in forks])
                for f, c in zip(facts["forks"], forks):
                    self.assertEqual(f["top_a"], len(c["stats"]["top5_a"]) + 1)
                    self.assertEqual(f["top_b"], len(c["stats"]["top5_b"]) + 1)
                    self.assertIn(c["stats"]["text_a"], f["text"])  # decoded with --vocab
        _, facts, _ = self.open("forks-near-tie")
        self.assertIn('"<b>bold</b> & \\"q\\""', facts["forks"][0]["text"])  # markup shown as text
        self.assertIn('"\\x1b[31m\u00e9"', facts["forks"][0]["text"])

    def test_witness_inspect_sweep_refused_and_hostile_pages(self):
        for name in ("witness", "inspect", "sweep", "refused", "hostile"):
            with self.subTest(run=name):
                page, facts, report = self.open(name)
                self.assert_common(name, page, facts, report)
        _, facts, report = self.open("witness")
        self.assertEqual(facts["witnesses"], [2])
        self.assertEqual(facts["tightest_rows"], len(report["checks"][0]["stats"]["tightest"]) + 1)
        _, facts, _ = self.open("hostile")
        self.assertIn("projections/" + HOSTILE_TEXT, [p["subject"] for p in facts["projections"]])


# ---- size ---------------------------------------------------------------------------------------


class SizeAndDeterminism(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = scratch("size")
        cls.a = os.path.join(cls.dir, "big-a.h5")
        cls.b = os.path.join(cls.dir, "big-b.h5")
        if not NCERT:
            return
        import numpy as np
        from ncert_dump import DumpWriter
        rng = np.random.default_rng(5)
        rows, vocab = 6000, 256
        for path, noise in ((cls.a, 0.0), (cls.b, 1e-3)):
            with DumpWriter(path, engine="size-test", build="b" if noise else "a", overwrite=True) as dw:
                for run_index in range(2):
                    base = np.random.default_rng(100 + run_index).standard_normal((rows, vocab)).astype(np.float32)
                    logits = base + (noise * rng.standard_normal((rows, vocab))).astype(np.float32)
                    dw.add_logits_run("run%d" % run_index, tokens=base.argmax(axis=1).astype(np.int32), logits=logits)

    def setUp(self):
        require_binary(self)

    def test_a_large_compare_stays_under_2_mb(self):
        out = os.path.join(self.dir, "big")
        run(["compare", self.a, self.b, "--matched-history", "--json", out + ".json", "--html", out + ".html",
             "--junit", out + ".xml"], expect=(1,))
        size = os.path.getsize(out + ".html")
        self.assertLess(size, 2 << 20)
        with open(out + ".json") as f:
            report = json.load(f)
        self.assertEqual(len(report["checks"]), 2)
        for c in report["checks"]:
            s = c["stats"]["series"]
            self.assertEqual((s["rows"], s["rows_per_point"], len(s["kl_ab_max"])), (6000, 12, 500))
        with open(out + ".html", encoding="utf-8") as f:
            html = f.read()
        self.assertEqual(html.count('class="plot series'), 6)
        run(["witness", self.a, "--html", out + "-witness.html"], expect=(0,))
        self.assertLess(os.path.getsize(out + "-witness.html"), 2 << 20)

    def test_pages_are_identical_at_any_thread_count(self):
        pages = []
        for threads in ("1", "2"):
            out = os.path.join(self.dir, "t" + threads)
            run(["compare", self.a, self.b, "--matched-history", "--policy", "kl:1", "--threads", threads,
                 "--html", out + ".html", "--junit", out + ".xml"], expect=(0,))
            with open(out + ".html", "rb") as f, open(out + ".xml", "rb") as g:
                pages.append((f.read(), g.read()))
        self.assertEqual(pages[0][0], pages[1][0])
        self.assertEqual(pages[0][1], pages[1][1])

    def test_report_paths_are_checked_before_any_work(self):
        cases = [
            (["--html", self.a], "--html %s is the input" % self.a),
            (["--junit", self.dir], "--junit %s is a directory" % self.dir),
            (["--html", os.path.join(self.dir, "missing", "r.html")], "does not exist"),
            (["--json", os.path.join(self.dir, "same"), "--junit", os.path.join(self.dir, "same")],
             "--json and --junit both name"),
            (["--html", "-", "--junit", "-"], "--html and --junit both name stdout"),
        ]
        for extra, message in cases:
            with self.subTest(args=extra):
                p = run(["compare", self.a, self.b] + extra)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(message, p.stderr.decode())
        p = run(["compare", self.a, self.b, "--matched-history", "--policy", "kl:1", "--html", "-"], expect=(0,))
        self.assertTrue(p.stdout.startswith(b"<!DOCTYPE html>"))  # the page alone, no summary
        p = run(["compare", self.a, self.b, "--matched-history", "--policy", "kl:1", "--json", "/dev/null",
                 "--html", "/dev/null"], expect=(0,))


GROUPS = {"junit": JUnitReports, "html": HtmlInBrowser, "size": SizeAndDeterminism}

if __name__ == "__main__":
    group = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1] in GROUPS else None
    if group == "html" and not chromium_cdp.find_chromium():
        ncert_testing.skip_whole_test("no Chromium to render the pages in (Debian's chromium: tools/install-deps)")
    suite = unittest.TestSuite()
    for name, cls in GROUPS.items():
        if group in (None, name):
            suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(cls))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
