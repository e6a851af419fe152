// The HTML and JUnit renderers and the evidence they draw from, against values worked out by
// hand: power-of-two binning at its exact edges, failure-grid cells, the compare series and the
// tightest witnesses built by the real checks; hostile strings (markup, quotes, control
// characters, invalid UTF-8, XML noncharacters) that must come out inert in both pages; the
// JUnit mapping of checks to testcases; the size caps of a page; and the page's layout for people:
// summary first, failing parts first and open, passing parts collapsed, plots of a PASS drawn
// without alarm colours, ids that wrap at '/' only.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "certify/logits/compare.h"
#include "certify/logits/witness.h"
#include "certify/report/detail/html_markup.h"
#include "certify/report/printable.h"
#include "certify/report/render_html.h"
#include "certify/report/render_junit.h"

namespace ncert::certify {
namespace {

// ---- evidence -------------------------------------------------------------------------------

TEST(Log2Histogram, BinsAreBinaryExponentsWithExactEdges) {
  Log2Histogram h(-4, 2);  // bins [2^-4, 2^-3) ... [2^1, 2^2)
  ASSERT_EQ(h.counts.size(), 6u);
  h.add(1.0);                          // [2^0, 2^1): bin 4
  h.add(std::nextafter(1.0, 0.0));     // just below 1: [2^-1, 2^0), bin 3
  h.add(0.0625);                       // 2^-4 exactly: bin 0
  h.add(std::nextafter(0.0625, 0.0));  // just below 2^-4: below
  h.add(3.999);                        // bin 5
  h.add(4.0);                          // 2^2: above
  h.add(0.0);
  h.add(std::numeric_limits<double>::quiet_NaN());
  h.add(std::numeric_limits<double>::infinity());
  h.add(-1.0);
  EXPECT_EQ(h.counts, (std::vector<Index>{1, 0, 0, 1, 1, 1}));
  EXPECT_EQ(h.below, 1);
  EXPECT_EQ(h.above, 1);
  EXPECT_EQ(h.zero, 1);
  EXPECT_EQ(h.other, 3);
  EXPECT_EQ(h.total(), 10);
}

TEST(Log2Histogram, MergingPartsEqualsCountingAtOnce) {
  Log2Histogram whole(-8, 8), a(-8, 8), b(-8, 8);
  for (int i = 0; i < 1000; ++i) {
    const double v = std::ldexp(1.0 + (i % 7) / 8.0, (i % 19) - 10);
    whole.add(v);
    (i % 3 == 0 ? a : b).add(v);
  }
  Log2Histogram ab(-8, 8), ba(-8, 8);
  ab.merge(a);
  ab.merge(b);
  ba.merge(b);
  ba.merge(a);
  EXPECT_EQ(ab.counts, whole.counts);
  EXPECT_EQ(ba.counts, whole.counts);
  EXPECT_EQ(ab.below, whole.below);
  EXPECT_EQ(ab.above, whole.above);
}

TEST(FailureGrid, CellsCoverEveryRowAndColumnEvenly) {
  const FailureGrid g(100, 1000);
  EXPECT_EQ(g.cell_rows, 32);
  EXPECT_EQ(g.cell_cols, 64);
  EXPECT_EQ(g.cell_row(0), 0);
  EXPECT_EQ(g.cell_row(99), 31);
  EXPECT_EQ(g.cell_col(999), 63);
  // Rows per cell differ by at most one (100 rows in 32 cells: 3 or 4 each).
  std::vector<int> per(32, 0);
  for (Index r = 0; r < 100; ++r) ++per[static_cast<std::size_t>(g.cell_row(r))];
  EXPECT_EQ(*std::min_element(per.begin(), per.end()), 3);
  EXPECT_EQ(*std::max_element(per.begin(), per.end()), 4);
  const FailureGrid small(3, 5);  // smaller than the cap: one cell per element
  EXPECT_EQ(small.cell_rows, 3);
  EXPECT_EQ(small.cell_cols, 5);
  EXPECT_EQ(small.cell_col(4), 4);
}

TEST(PositionSeries, GroupsRowsAndKeepsTheirWorstFigures) {
  RunComparison c;
  c.run_a = c.run_b = "greedy";
  c.vocab = 10;
  c.rows_a = c.rows_b = c.compared = c.matched = 1025;  // 3 rows per point: 342 points
  c.rows.resize(1025);
  for (Index t = 0; t < 1025; ++t) {
    RowComparison& x = c.rows[static_cast<std::size_t>(t)];
    x.kl_ab = 1e-6 * static_cast<double>(t);
    x.max_abs = t == 700 ? 5.0 : 1e-3;
    x.argmax_a = 1;
    x.argmax_b = t % 3 == 0 ? 2 : 1;  // one row of every group disagrees
  }
  c.rows[10].kl_ab = std::numeric_limits<double>::quiet_NaN();
  Policy kl;
  kl.kind = Policy::Kind::kKl;
  kl.kl = 1;
  kl.text = "kl:1";
  const CheckResult r = logits_check(c, kl);
  const auto& s = std::get<LogitsEvidence>(r.evidence).series;
  EXPECT_EQ(s.rows, 1025);
  EXPECT_EQ(s.rows_per_point, 3);
  ASSERT_EQ(s.kl_max.size(), 342u);
  EXPECT_EQ(s.kl_max[0], 2e-6);          // the largest of rows 0, 1, 2
  EXPECT_TRUE(std::isinf(s.kl_max[3]));  // rows 9-11 hold the NaN
  EXPECT_EQ(s.max_abs[233], 5.0);        // row 700 = 233 * 3 + 1
  EXPECT_EQ(s.top1_agree[0], 2);
  EXPECT_EQ(s.group_rows(341), 2);  // rows 1023, 1024
  EXPECT_EQ(s.top1_agree[341], 1);
}

TEST(WitnessEvidence, TightestAreTheSmallestValidUntiedMargins) {
  RunWitnesses run;
  run.run = "greedy";
  run.vocab = 100;
  const double margins[] = {0.5, 0.125, 2.0, 0.125, 0.0, 1e-7};
  for (int i = 0; i < 6; ++i) {
    Witness w;
    w.row = w.position = i;
    w.token = i;
    w.logit = 10;
    w.margin = margins[i];
    w.margin_ulps = margins[i] / std::ldexp(1.0, -20);
    w.margin_dtype_ulps = w.margin_ulps;  // f32 logits: their own ulps are f32 ulps
    w.ties = margins[i] == 0 ? 2 : 1;
    w.cls = margins[i] == 0 ? WitnessClass::kTie : WitnessClass::kUnbounded;
    run.witnesses.push_back(w);
  }
  run.witnesses[5].ok = false;  // a failure is never "tight"
  run.witnesses[5].failure = "not the maximum";
  run.failed = 1;
  const CheckResult c = witness_checks(run).front();
  const auto& e = std::get<WitnessEvidence>(c.evidence);
  ASSERT_EQ(e.tightest.size(), 4u);  // the tie and the failure are left out
  EXPECT_EQ(e.tightest[0].row, 1);   // 0.125 at rows 1 and 3: row order
  EXPECT_EQ(e.tightest[1].row, 3);
  EXPECT_EQ(e.tightest[2].row, 0);
  EXPECT_EQ(e.tightest[3].row, 2);
  EXPECT_EQ(e.margin.zero, 1);  // the tie
  EXPECT_EQ(e.margin.total(), 5);
  EXPECT_EQ(e.margin.counts[static_cast<std::size_t>(-3 - e.margin.log2_min)], 2);            // 0.125 = 2^-3
  EXPECT_EQ(e.margin_ulps.counts[static_cast<std::size_t>(17 - e.margin_ulps.log2_min)], 2);  // 2^17 ulps
}

TEST(BoundFigures, AnUtilizationThatIsNotAShareSaysWhy) {
  // Inside its interval every value uses a finite share (<= 1); a NaN, or a value outside on a
  // side where the interval does not extend past y*, has none: "inf" in the JSON, and a note
  // with the counts that explain it.
  BoundFigures s;
  s.elements = 4096;
  s.max_utilization = 0.25;
  EXPECT_EQ(s.utilization_note(), "");
  s.max_utilization = std::numeric_limits<double>::infinity();
  s.outside = 3;
  EXPECT_EQ(s.utilization_note().rfind("not defined: 3 value(s) outside their accepted interval", 0), 0u)
      << s.utilization_note();
  s.outside = 0;
  s.nonfinite = 2;
  EXPECT_EQ(s.utilization_note(), "not defined: 2 non-finite value(s)");
  CheckResult c;
  c.id = "lm_head/bound";
  c.kind = CheckKind::kBound;
  BoundEvidence e;
  e.outputs.push_back(OutputBound{});
  e.outputs[0].output = "y_unpacked";
  e.outputs[0].stats = s;
  c.evidence = e;
  const Json j = check_json(c)["stats"]["outputs"]["y_unpacked"];
  EXPECT_EQ(j["max_utilization"], "inf");  // kept for existing readers
  EXPECT_EQ(j["max_utilization_note"], "not defined: 2 non-finite value(s)");
  e.outputs[0].stats.max_utilization = 0.5;
  c.evidence = e;
  EXPECT_FALSE(check_json(c)["stats"]["outputs"]["y_unpacked"].contains("max_utilization_note"));
}

// ---- hostile strings ------------------------------------------------------------------------

const std::string kHostile =
    "<script>alert(\"x\")</script>'&\x1b[2J\xff\xfe\xef\xbf\xbe<img src=http://example.invalid/x>";

Report hostile_report() {
  Report r;
  r.command = "check";
  r.inputs.push_back({"dump" + kHostile + ".h5", "0123456789abcdef0123456789abcdef"});
  CheckResult bound;
  bound.id = "projections/" + kHostile + "/bound";
  bound.subject = "projections/" + kHostile;
  bound.kind = CheckKind::kBound;
  bound.verdict = Verdict::kFail;
  bound.reason = "y_packed outside " + kHostile;
  bound.details = {"detail " + kHostile};
  BoundEvidence be;
  be.accumulator = kHostile;
  OutputBound out;
  out.output = "y_packed";
  out.error_over_bound.add(0.5);
  out.outside = FailureGrid(4, 4);
  out.outside.counts.assign(16, 0);
  out.outside.counts[5] = 3;
  be.outputs.push_back(out);
  be.first = BoundFailure{"y_packed", {1, 1, 2.0f, 1.0, 0.25, {0.75f, 1.25f}}, 3};
  bound.evidence = be;
  r.checks.push_back(bound);
  CheckResult fork;
  fork.id = "forks/" + kHostile + "/3";
  fork.subject = "forks/" + kHostile;
  fork.kind = CheckKind::kFork;
  fork.verdict = Verdict::kSkip;
  fork.reason = "undetermined " + kHostile;
  ForkEvidence fe;
  fe.has_text = true;
  fe.context_text = fe.text_a = fe.text_b = kHostile;
  fe.fork.a.top = {{1, 2.0f, 0}, {2, 1.0f, 1}};
  fe.fork.b.top = {{2, 2.0f, 0}};
  fe.top_a_text = {kHostile, kHostile};
  fe.top_b_text = {kHostile};
  fe.fork.envelope_source = kHostile;
  fe.fork.why = kHostile;
  fork.evidence = fe;
  r.checks.push_back(fork);
  r.stats[kHostile] = kHostile;
  r.extra["datasets"] = Json::array({Json{{"path", kHostile}}});
  return r;
}

/// No byte of `page` can start markup the renderer did not write, drive a terminal, or break
/// UTF-8 / XML 1.0.
void expect_inert(const std::string& page) {
  EXPECT_EQ(valid_utf8(page), page) << "invalid UTF-8";
  for (unsigned char ch : page) {
    EXPECT_TRUE(ch >= 0x20 || ch == '\n') << "control character " << static_cast<int>(ch);
    if (ch < 0x20 && ch != '\n') break;
  }
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);          // only as text: &lt;img src=...
  EXPECT_EQ(page.find("\xef\xbf\xbe"), std::string::npos);  // U+FFFE, not an XML character
  EXPECT_NE(page.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;\\x1b[2J\\xff\\xfe\\xef\\xbf\\xbe"),
            std::string::npos);
}

TEST(RenderHtml, HostileNamesAreShownAsTextAndNothingElse) {
  const std::string html = render_html(hostile_report());
  expect_inert(html);
  EXPECT_NE(html.find("content=\"default-src 'none';"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_NE(html.find("class=\"plot bound-hist\""), std::string::npos);
  EXPECT_NE(html.find("class=\"plot fail-grid\""), std::string::npos);
  EXPECT_NE(html.find("rows 1-1, cols 1-1: 3 outside"), std::string::npos);  // cell 5 of a 4 x 4 grid
}

TEST(RenderJunit, HostileNamesAreEscapedAndNoControlCharacterRemains) {
  const std::string xml = render_junit(hostile_report());
  expect_inert(xml);
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
}

// ---- the JUnit mapping ----------------------------------------------------------------------

TEST(RenderJunit, OneTestcasePerCheckWithSkipsFailuresAndTheRefusalAsError) {
  Report r;
  r.command = "check";
  r.inputs.push_back({"a.h5", "00000000000000000000000000000001"});
  CheckResult pass;
  pass.id = "projections/attn/bound";
  pass.subject = "projections/attn";
  pass.kind = CheckKind::kBound;
  pass.reason = "all inside";
  r.checks.push_back(pass);
  r.checks.push_back(skipped("projections/attn/walk", "projections/attn", CheckKind::kWalk, "no k_walk declared"));
  CheckResult fail;
  fail.id = "logits/greedy";  // compare's checks have no subject
  fail.kind = CheckKind::kLogits;
  fail.verdict = Verdict::kFail;
  fail.reason = "row 0 differs";
  fail.details = {"row 0: max |d| 1"};
  r.checks.push_back(fail);
  // A failing comparison's stats hold its run time, which the page leaves out (a review's two
  // runs' pages differed in that line alone).
  CheckResult timed = fail;
  timed.id = "logits/timed";
  LogitsEvidence le;
  le.timing_seconds = 0.00189;
  le.rows_a = 7;
  timed.evidence = le;
  r.checks.push_back(timed);
  r.refuse(Status(ErrorCode::kNotHdf5, "b.h5: not an HDF5 file"));
  const std::string x = render_junit(r);
  EXPECT_NE(x.find("<testsuite name=\"ncert check\" tests=\"5\" failures=\"2\" errors=\"1\" skipped=\"1\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("&quot;rows_a&quot;: 7"), std::string::npos) << x;
  EXPECT_EQ(x.find("timing"), std::string::npos) << x;
  EXPECT_NE(
      x.find("<testcase classname=\"projections.attn\" name=\"bound\">\n      <system-out>all inside</system-out>"),
      std::string::npos);
  EXPECT_NE(x.find("<testcase classname=\"projections.attn\" name=\"walk\">\n      <skipped type=\"unexpected\" "
                   "message=\"no k_walk declared\"/>"),
            std::string::npos);
  EXPECT_NE(x.find("<testcase classname=\"logits.greedy\" name=\"logits\">\n      <failure message=\"row 0 differs\" "
                   "type=\"logits\">row 0 differs\nrow 0: max |d| 1\nstats: {}</failure>"),
            std::string::npos);
  EXPECT_NE(x.find("<testcase classname=\"dump\" name=\"schema\">\n      <error message=\"b.h5: not an HDF5 file\" "
                   "type=\"not-hdf5\">"),
            std::string::npos);
  EXPECT_NE(x.find("<property name=\"input.1.xxh3_128\" value=\"00000000000000000000000000000001\"/>"),
            std::string::npos);
  EXPECT_EQ(x.find("time="), std::string::npos);  // nothing that changes between identical runs
}

TEST(RenderJunit, ACampaignNamesEachCheckAsItsCommandDoesWithTheEntryFirst) {
  // Checks without a subject read classname "cmp." and name "cmp/logits/greedy"; a dump's own
  // checks "g.dump" and "g/schema" (a review's).
  Report entry;
  entry.command = "compare";
  CheckResult logits;
  logits.id = "logits/greedy";
  logits.kind = CheckKind::kLogits;
  entry.checks.push_back(logits);
  CheckResult schema;
  schema.id = "schema";
  schema.subject = "dump";
  schema.kind = CheckKind::kSchema;
  entry.checks.push_back(schema);
  CheckResult bound;
  bound.id = "projections/attn/bound";
  bound.subject = "projections/attn";
  bound.kind = CheckKind::kBound;
  entry.checks.push_back(bound);
  const std::string alone = render_junit(entry);
  Report campaign;
  campaign.command = "campaign";
  campaign.add_entry("e1", "compare", entry);
  const std::string x = render_junit(campaign);
  for (const auto& [own, in_campaign] :
       {std::pair<const char*, const char*>{"classname=\"logits.greedy\" name=\"logits\"",
                                            "classname=\"e1.logits.greedy\" name=\"logits\""},
        {"classname=\"dump\" name=\"schema\"", "classname=\"e1.dump\" name=\"schema\""},
        {"classname=\"projections.attn\" name=\"bound\"", "classname=\"e1.projections.attn\" name=\"bound\""}}) {
    EXPECT_NE(alone.find(own), std::string::npos) << own << "\n" << alone;
    EXPECT_NE(x.find(in_campaign), std::string::npos) << in_campaign << "\n" << x;
  }
}

// ---- layout: summary, failures first, collapsed passes, calm plots, ids that wrap ---------------

/// A projection's bound check of one output, passing or failing, with its histogram (a NaN in
/// `other`, a value at B) and, when failing, its failure map.
CheckResult bound_check(const std::string& projection, bool fail) {
  CheckResult c;
  c.id = "projections/" + projection + "/bound";
  c.subject = "projections/" + projection;
  c.kind = CheckKind::kBound;
  c.verdict = fail ? Verdict::kFail : Verdict::kPass;
  c.reason = fail ? "y_packed row 1 col 1: 2 outside [0.75, 1.25]" : "every value inside its interval";
  BoundEvidence e;
  e.accumulator = "f32-rn";
  e.output = DType::kF32;
  OutputBound out;
  out.output = "y_packed";
  out.error_over_bound.add(0.25);
  out.error_over_bound.add(1.5);  // from B up: the warning bins
  out.error_over_bound.add(std::numeric_limits<double>::quiet_NaN());
  if (fail) {
    out.outside = FailureGrid(4, 4);
    out.outside.counts.assign(16, 0);
    out.outside.counts[5] = 1;
  }
  e.outputs.push_back(out);
  c.evidence = e;
  return c;
}

Report check_report(bool fail) {
  Report r;
  r.command = "check";
  r.inputs.push_back({fail ? "dumps/step-001.h5" : "dumps/step-000.h5", "0123456789abcdef0123456789abcdef"});
  r.checks.push_back(bound_check("attn_qkv", false));
  r.checks.push_back(skipped("projections/attn_qkv/walk", "projections/attn_qkv", CheckKind::kWalk, "no k_walk"));
  r.checks.push_back(bound_check("mlp_down", fail));
  return r;
}

/// An id as the page writes it (detail::id_markup: parts that do not wrap, joined by <wbr>).
std::string ids(std::string_view id) { return detail::id_markup(id); }

/// Where `needle` first is in `page` (npos fails the test).
std::size_t at(const std::string& page, const std::string& needle) {
  const std::size_t p = page.find(needle);
  EXPECT_NE(p, std::string::npos) << needle;
  return p;
}

TEST(RenderHtml, ACampaignPageSummarizesEveryEntryThenFailuresOpenAndPassesCollapsed) {
  Report campaign;
  campaign.command = "campaign";
  campaign.add_entry("step-000", "check", check_report(false));
  campaign.add_entry("step-001", "check", check_report(true));
  Report refused;
  refused.command = "check";
  refused.refuse(Status(ErrorCode::kNotHdf5, "dumps/corrupt.h5: not an HDF5 file"));
  campaign.add_entry("corrupt", "check", refused);
  ASSERT_EQ(campaign.checks.size(), 7u);
  EXPECT_EQ(campaign.checks[3].id, "step-001/projections/attn_qkv/bound");
  EXPECT_EQ(campaign.first_check(2), 6u);
  const std::string page = render_html(campaign);

  // The summary comes first: one row per entry, the failing ones first (in manifest order), each
  // with its counts and worst finding.
  const std::size_t summary = at(page, "<section id=\"summary\">");
  EXPECT_LT(at(page, "<header id=\"verdict\""), summary);
  const std::size_t row_001 = at(page, "<tr class=\"part fail\" data-part=\"step-001\" data-verdict=\"FAIL\">");
  const std::size_t row_corrupt = at(page, "<tr class=\"part fail\" data-part=\"corrupt\" data-verdict=\"FAIL\">");
  const std::size_t row_000 = at(page, "<tr class=\"part pass\" data-part=\"step-000\" data-verdict=\"PASS\">");
  EXPECT_LT(summary, row_001);
  EXPECT_LT(row_001, row_corrupt);
  EXPECT_LT(row_corrupt, row_000);
  EXPECT_NE(page.find("<td>check</td><td class=\"num\">3</td><td class=\"num\">1</td><td class=\"num\">1</td>"
                      "<td class=\"num\">1</td><td class=\"num\">0</td><td class=\"worst\"><b>" +
                          ids("projections/mlp_down/bound") + "</b> y_packed row 1 col 1: 2 outside [0.75, 1.25]</td>",
                      row_001),
            std::string::npos);
  EXPECT_NE(
      page.find("<td class=\"worst\"><b>refused</b> not-hdf5: dumps/corrupt.h5: not an HDF5 file</td>", row_corrupt),
      std::string::npos);
  EXPECT_NE(page.find("<td class=\"worst\"><b>" + ids("projections/attn_qkv/walk") + "</b> no k_walk</td>", row_000),
            std::string::npos);

  // Then the failing entries, open, before the passing one, collapsed; the first failing check
  // of the page comes before its first passing check.
  const std::size_t failures = at(page, "<section id=\"failures\">");
  const std::size_t open_001 =
      at(page, "<details class=\"part fail\" data-part=\"step-001\" data-verdict=\"FAIL\" open>");
  const std::size_t closed_000 = at(page, "<details class=\"part pass\" data-part=\"step-000\" data-verdict=\"PASS\">");
  EXPECT_LT(summary, failures);
  EXPECT_LT(failures, open_001);
  EXPECT_LT(open_001, closed_000);
  EXPECT_LT(at(page, "<tr class=\"check fail\""), at(page, "<tr class=\"check pass\""));
  // Inside the failing entry: its failing check first, its failing projection's section first.
  EXPECT_LT(page.find(ids("step-001/projections/mlp_down/bound") + "</td>", open_001),
            page.find(ids("step-001/projections/attn_qkv/bound") + "</td>", open_001));
  EXPECT_LT(page.find("data-subject=\"step-001/projections/mlp_down\"", open_001),
            page.find("data-subject=\"step-001/projections/attn_qkv\"", open_001));
  EXPECT_NE(page.find("<table class=\"facts error\"><caption>input refused</caption>"), std::string::npos);
  // Each entry once: no entry's JSON dumped into a table.
  EXPECT_EQ(page.find("\"report\""), std::string::npos);
}

TEST(RenderHtml, ASingleCommandPageHasOnePartPerSubjectFailingFirst) {
  const std::string page = render_html(check_report(true));
  const std::size_t fail_row = at(page, "<tr class=\"part fail\" data-part=\"projections/mlp_down\"");
  const std::size_t pass_row = at(page, "<tr class=\"part pass\" data-part=\"projections/attn_qkv\"");
  EXPECT_LT(fail_row, pass_row);
  EXPECT_LT(at(page, "data-part=\"projections/mlp_down\" data-verdict=\"FAIL\" open>"),
            at(page, "<details class=\"part pass\" data-part=\"projections/attn_qkv\" data-verdict=\"PASS\">"));
  EXPECT_NE(page.find("<th>subject</th><th>checks</th>"), std::string::npos);  // no command column
  EXPECT_NE(page.find("<section id=\"coverage\">"), std::string::npos);
  // A page without failures has no failures section and every part collapsed.
  const std::string pass = render_html(check_report(false));
  EXPECT_EQ(pass.find("<section id=\"failures\">"), std::string::npos);
  EXPECT_EQ(pass.find(" open>"), std::string::npos);
}

TEST(RenderHtml, PlotsOfChecksThatDidNotFailAreCalm) {
  const std::string page = render_html(check_report(true));
  // The failing bound's histogram keeps its warning colours (and its map); the passing one's
  // are neutral: no red marker, no orange bins, no red non-finite bin.
  const std::size_t failing = at(page, "data-subject=\"projections/mlp_down\"");
  const std::size_t passing = at(page, "data-subject=\"projections/attn_qkv\"");
  EXPECT_NE(page.find("<svg class=\"plot bound-hist\" data-output", failing), std::string::npos);
  EXPECT_NE(page.find("<svg class=\"plot fail-grid\"", failing), std::string::npos);
  const std::size_t calm = page.find("<svg class=\"plot bound-hist calm\" data-output", passing);
  EXPECT_NE(calm, std::string::npos);
  EXPECT_LT(calm, page.find("</section>", passing));
  for (const char* rule : {"svg.calm .marker{stroke:#57606a}", "svg.calm .bar.over{fill:#0969da}",
                           "svg.calm .bar.other,svg.calm .inf{fill:#8c959f}"}) {
    EXPECT_NE(page.find(rule), std::string::npos) << rule;
  }
  // A passing page: every plot calm.
  const std::string pass = render_html(check_report(false));
  std::size_t plots = 0, calm_plots = 0;
  for (std::size_t p = pass.find("<svg class=\"plot"); p != std::string::npos;
       p = pass.find("<svg class=\"plot", p + 1)) {
    ++plots;
    const std::string cls = pass.substr(p, pass.find('"', p + 12) - p);
    calm_plots += cls.find(" calm") != std::string::npos;
  }
  EXPECT_EQ(plots, 2u);
  EXPECT_EQ(calm_plots, plots);
}

TEST(RenderHtml, IdsWrapAtSlashesOnly) {
  Report campaign;
  campaign.command = "campaign";
  campaign.add_entry("qwen3-30b-a3b/step-000", "check", check_report(true));
  const std::string page = render_html(campaign);
  // Every id cell: parts that do not wrap, each ending at a '/', joined by <wbr>; the cells' own
  // style keeps words whole (break-word breaks a word only when it alone is wider than the line;
  // anywhere would break any word, and the ids did at 1,400 px).
  EXPECT_NE(page.find("<td class=\"id\"><span class=\"n\">qwen3-30b-a3b/</span><wbr><span class=\"n\">step-000/"
                      "</span><wbr><span class=\"n\">projections/</span><wbr><span class=\"n\">mlp_down/</span><wbr>"
                      "<span class=\"n\">bound</span></td>"),
            std::string::npos);
  EXPECT_NE(page.find("<td class=\"id\">" + ids("dumps/step-001.h5") + "</td>"), std::string::npos);  // input paths
  EXPECT_NE(page.find("overflow-wrap:break-word}span.n{white-space:nowrap}"), std::string::npos);
  EXPECT_EQ(page.find("overflow-wrap:anywhere}table.checks"), std::string::npos);
  std::size_t cells = 0;
  for (std::size_t p = page.find("<td class=\"id\">"); p != std::string::npos;
       p = page.find("<td class=\"id\">", p + 1)) {
    const std::size_t end = page.find("</td>", p);
    const std::string cell = page.substr(p + 15, end - p - 15);
    ++cells;
    // Between parts only: each '/' ends a part, and the next part starts after a <wbr>.
    for (std::size_t q = cell.find('/'); q != std::string::npos; q = cell.find('/', q + 1)) {
      if (cell.compare(q - 1, 1, "<") == 0) continue;  // a closing tag
      EXPECT_EQ(cell.compare(q + 1, 7, "</span>"), 0) << cell;
      if (q + 8 < cell.size()) {
        EXPECT_EQ(cell.compare(q + 8, 5, "<wbr>"), 0) << cell;
      }
    }
  }
  EXPECT_EQ(cells, 7u);  // the summary row, the input, 2 coverage rows, 3 checks
  EXPECT_EQ(detail::id_markup("a/<b>/c"),
            "<span class=\"n\">a/</span><wbr><span class=\"n\">&lt;b&gt;/</span><wbr><span class=\"n\">c</span>");
  EXPECT_EQ(detail::id_markup("af4-scale-x2"), "<span class=\"n\">af4-scale-x2</span>");
  EXPECT_EQ(detail::id_markup("a/"), "<span class=\"n\">a/</span>");
}

// ---- size -----------------------------------------------------------------------------------

TEST(RenderHtml, APageIsCappedWhateverTheRowsAndVocabulary) {
  Report r;
  r.command = "compare";
  for (int run = 0; run < 8; ++run) {
    CheckResult c;
    c.id = "logits/run" + std::to_string(run);
    c.kind = CheckKind::kLogits;
    LogitsEvidence e;
    e.matched = e.compared = e.rows_a = e.rows_b = 1 << 20;
    e.vocab = 151936;
    e.series.rows = e.matched;
    e.series.rows_per_point = e.matched / PositionSeries::kMaxPoints;
    for (Index i = 0; i < PositionSeries::kMaxPoints; ++i) {
      e.series.kl_max.push_back(std::ldexp(1.2345678901234, -static_cast<int>(i % 40)));
      e.series.max_abs.push_back(0.001 * static_cast<double>(i + 1));
      e.series.top1_agree.push_back(e.series.rows_per_point - i % 3);
    }
    for (int t = 0; t < 16; ++t) e.first_rows.emplace_back();
    c.evidence = e;
    c.details = std::vector<std::string>(1000, std::string(200, 'd'));
    r.checks.push_back(c);
  }
  const std::string html = render_html(r);
  EXPECT_LT(html.size(), 600u * 1024) << "8 runs of 2^20 rows";
  EXPECT_NE(html.find("... 960 more"), std::string::npos);  // detail lines are capped at 40
}

}  // namespace
}  // namespace ncert::certify
