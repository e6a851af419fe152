#include "certify/commands/forks.h"

#include <algorithm>
#include <string>

#include "certify/logits/compare.h"

namespace ncert::certify {

Result<Report> run_forks(const ForksOptions& o) {
  // The vocabulary is an input too: the report's token texts come from it.
  InputHashes hashes(o.vocab_file.empty() ? std::vector<std::string>{o.a, o.b}
                                          : std::vector<std::string>{o.a, o.b, o.vocab_file});
  Report report;
  report.command = "forks";
  auto refuse = [&](const Status& s) {
    report.inputs = hashes.finish();
    return report.refuse(s);
  };
  auto ra = DumpReader::open(o.a, o.reader);
  if (!ra.ok()) return refuse(ra.status());
  auto rb = DumpReader::open(o.b, o.reader);
  if (!rb.ok()) return refuse(rb.status());
  std::optional<Vocabulary> vocab;
  if (!o.vocab_file.empty()) {
    auto v = Vocabulary::load(o.vocab_file);
    if (!v.ok()) return refuse(v.status());
    vocab = std::move(*v);
  }
  const DumpModel& A = ra->model();
  const DumpModel& B = rb->model();
  report.preamble.push_back("ncert forks " + o.a + " (" + A.engine + " " + A.build + ") vs " + o.b + " (" + B.engine +
                            " " + B.build + ")" + (o.matched_history ? ", teacher-forced" : ""));
  NCERT_ASSIGN_OR_RETURN(RunPairing paired, pair_runs(A, B, o.pairs, o.a, o.b));
  if (paired.pairs.empty()) {
    return refuse(no_common_runs(A, B, o.a, o.b, false));
  }
  if (Status s = check_vocabularies(paired, o.a, o.b); !s.ok()) return refuse(s);
  if (vocab) {
    // Tokenizers often hold fewer entries than the logits' padded vocabulary (Qwen2: 151,646 of
    // 151,936); more than it suggests another model's tokenizer. Either is said, not refused.
    Index logits_vocab = 0;
    for (const auto& [x, y] : paired.pairs) logits_vocab = std::max(logits_vocab, x->vocab);
    const auto tokens = static_cast<Index>(vocab->size());
    if (tokens < logits_vocab) {
      report.preamble.push_back("--vocab " + o.vocab_file + ": " + std::to_string(tokens) +
                                " token texts for a vocabulary of " + std::to_string(logits_vocab) + " (ids from " +
                                std::to_string(tokens) + " on show as <id N?>)");
    } else if (tokens > logits_vocab) {
      report.preamble.push_back("--vocab " + o.vocab_file + ": " + std::to_string(tokens) +
                                " token texts, more than the vocabulary of " + std::to_string(logits_vocab) +
                                ": is it this model's tokenizer?");
    }
  }
  Index forks = 0;
  Json classes = Json{{"tie", 0}, {"near-tie", 0}, {"unexplained", 0}, {"invalid", 0}, {"undetermined", 0}};
  for (const auto& [x, y] : paired.pairs) {
    NCERT_ASSIGN_OR_RETURN(RunForks r, find_forks(*ra, *x, *rb, *y, o));
    for (const Fork& f : r.forks) {
      classes[std::string(fork_class_name(f.cls))] = classes[std::string(fork_class_name(f.cls))].get<int>() + 1;
    }
    forks += static_cast<Index>(r.forks.size());
    for (CheckResult& c : fork_checks(r, o, vocab ? &*vocab : nullptr)) report.checks.push_back(std::move(c));
  }
  report.apply(o.require);
  if (o.skip_policy) report.apply(*o.skip_policy);
  report.stats["runs"] = paired.pairs.size();
  report.stats["forks"] = forks;
  report.stats["classes"] = classes;
  if (!paired.one_sided.empty()) report.stats["unpaired_runs"] = paired.one_sided;
  report.inputs = hashes.finish();
  return report;
}

}  // namespace ncert::certify
