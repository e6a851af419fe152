#include "certify/commands/option_tables.h"

#include <string>

namespace ncert::certify {

namespace {

// Shared rows: one spec per option that several commands take, so a help text or a range is
// written once. Each is a function of the options struct it sets.

template <class O>
OptionSpec<O> lambda_option() {
  return number_option<O>("lambda", "X",
                          "The probabilistic tier multiplier of reference bounds (docs/error-bounds.md §3)", 1, 1000,
                          [](O& o) -> double& { return o.lambda; });
}

template <class O, class Field>
OptionSpec<O> logit_error_option(const std::string& help, Field field) {
  return number_option<O>("logit-error", "ABS", help, 0, 1e30, field);
}

template <class O, class Field>
OptionSpec<O> require_option(const std::string& help, Field field) {
  return parsed_option<O>(
      "require", "KINDS", help, [](std::string_view s) { return parse_requirement(s); },
      [](const Requirement& r) { return r.text(); }, field);
}

/// --policy FILE; the manifest key is skip_policy (compare's "policy" is its logits policy, and a
/// manifest's defaults reach every kind that takes a key).
template <class O>
OptionSpec<O> skip_policy_option() {
  OptionSpec<O> s = parsed_option<O>(
      "policy", "FILE",
      "Skip policy (JSON, docs/cli.md \"Skip policy\"): skips it expects pass and are marked expected, any "
      "other skip fails; a bad file is refused (skip-policy-invalid, exit 2)",
      [](std::string_view path) { return load_skip_policy(std::string(path)); },
      [](const SkipPolicy& p) { return p.path; }, [](O & o) -> auto& { return o.skip_policy; });
  s.key = "skip_policy";
  return s;
}

template <class O>
OptionSpec<O> pair_option() {
  OptionSpec<O> s = list_option<O>(
      "pair", "a:b",
      "Pair run a of A with run b of B (repeatable; replaces pairing by name; names holding ':' pair at the one colon "
      "whose halves name a run of each)",
      [](std::string_view text) { return parse_run_pair(text); }, [](O & o) -> auto& { return o.pairs; });
  s.key = "pairs";
  return s;
}

template <class O>
OptionSpec<O> matched_history_option(const std::string& help) {
  return flag_option<O>("matched-history", help, [](O& o) -> bool& { return o.matched_history; });
}

template <class O>
OptionSpec<O> only_option(const std::string& help) {
  return text_option<O>("only", "TEXT", help, [](O& o) -> std::string& { return o.only; });
}

constexpr const char* kRequireHelp =
    "Fail when a check of these kinds is skipped: 'all', or kinds such as untouched,walk";

}  // namespace

Result<std::pair<std::string, std::string>> parse_run_pair(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return Status(ErrorCode::kUsage, "expected a:b, got " + std::string(text));
  }
  return std::pair<std::string, std::string>(text.substr(0, colon), text.substr(colon + 1));
}

const OptionTable<CheckCommandOptions>& check_option_table() {
  using O = CheckCommandOptions;
  static const OptionTable<O> table = {
      flag_option<O>("strict", "Also fail on values beyond the probabilistic tier (by default a statistic)",
                     [](O& o) -> bool& { return o.check.strict; }),
      flag_option<O>("allow-vacuous", "Let projections that prove nothing pass (still reported as vacuous)",
                     [](O& o) -> bool& { return o.check.allow_vacuous; }),
      number_option<O>("lambda", "X", "The probabilistic tier multiplier of reference bounds (docs/error-bounds.md §3)",
                       1, 1000, [](O& o) -> double& { return o.check.lambda; }),
      logit_error_option<O>(
          "Absolute error bound of every logit, for runs without an lm_head projection",
          [](O & o) -> auto& { return o.logit_error; }),
      only_option<O>("Certify only the projections and runs whose name contains TEXT (selecting nothing: exit 2)"),
      require_option<O>(
          kRequireHelp, [](O & o) -> auto& { return o.require; }),
      skip_policy_option<O>(),
      path_option<O>("weights", "W.h5",
                     "Weights dump: projections that omit their weights and declare weights_xxh3 take the weights "
                     "with that hash from it (docs/dump-format.md §4.5); without it they are refused (223)",
                     [](O& o) -> std::string& { return o.weights; }),
  };
  return table;
}

const OptionTable<CompareOptions>& compare_option_table() {
  using O = CompareOptions;
  static const OptionTable<O> table = {
      pair_option<O>(),
      matched_history_option<O>("B was teacher-forced on A's tokens: every row is matched and judged"),
      parsed_option<O>(
          "policy", "P",
          "When two runs' logits agree: bitwise, ulp:N, abs:A, abs:A,rel:R, kl:X, top1 or forks (default: bitwise, "
          "or forks where the two runs' logits differ in dtype)",
          [](std::string_view s) { return parse_policy(s); }, [](const Policy& p) { return p.text; },
          [](O& o) -> std::optional<Policy>& { return o.policy; }),
      parsed_option<O>(
          "tensor-policy", "P", "bitwise, ulp:N or abs:A[,rel:R] for every tensor, overriding their compare attributes",
          [](std::string_view s) { return parse_tensor_policy(s); }, [](const Policy& p) { return p.text; },
          [](O& o) -> std::optional<Policy>& { return o.tensor_policy; }),
      flag_option<O>("allow-missing", "A run or tensor present on one side only passes (it is still reported)",
                     [](O& o) -> bool& { return o.allow_missing; }),
  };
  return table;
}

const OptionTable<ForksOptions>& forks_option_table() {
  using O = ForksOptions;
  static const OptionTable<O> table = {
      pair_option<O>(),
      matched_history_option<O>(
          "B was teacher-forced on A's tokens: every position whose emissions differ is a fork (otherwise only the "
          "first: later rows have other histories)"),
      logit_error_option<O>(
          "Each run's per-logit error; the envelope is twice it, overriding every other source",
          [](O & o) -> auto& { return o.logit_error; }),
      lambda_option<O>(),
      flag_option<O>("require-identical", "Fail on any fork, and on streams of different lengths",
                     [](O& o) -> bool& { return o.require_identical; }),
      require_option<O>(
          "Fail when a check of these kinds is skipped: 'all', or kinds (fork: undetermined forks)",
          [](O & o) -> auto& { return o.require; }),
      skip_policy_option<O>(),
      path_option<O>("vocab", "FILE",
                     "Token texts beside ids: a JSON list of strings (index = id) or a Hugging Face tokenizer.json; "
                     "one of another size than the logits' vocabulary is said in the summary, not refused",
                     [](O& o) -> std::string& { return o.vocab_file; }),
      integer_option<O>("context", "N", "Shared-history tokens shown per fork", 0, 4096,
                        [](O& o) -> Index& { return o.context; }),
  };
  return table;
}

const OptionTable<WitnessOptions>& witness_option_table() {
  using O = WitnessOptions;
  static const OptionTable<O> table = [] {
    OptionTable<O> t = {
        path_option<O>("out", "WITNESS.h5",
                       "Also write the witnesses to an HDF5 witness file (a regular file, not a device; written "
                       "beside it under a temporary name and renamed once whole) and WITNESS.h5.json (a report: it "
                       "replaces only an empty file or a report)",
                       [](O& o) -> std::string& { return o.out; }),
        flag_option<O>("force",
                       "Overwrite --out (otherwise an existing file is refused: output-exists, exit 2); without "
                       "--out a usage error",
                       [](O& o) -> bool& { return o.overwrite; }),
        logit_error_option<O>(
            "Absolute error bound of every logit, for runs without an lm_head projection",
            [](O & o) -> auto& { return o.logit_error; }),
        lambda_option<O>(),
        only_option<O>("Only runs whose name contains TEXT (selecting nothing: exit 2)"),
        require_option<O>(
            kRequireHelp, [](O & o) -> auto& { return o.require; }),
        skip_policy_option<O>(),
    };
    // A campaign writes no witness files: --out and --force are the command line's.
    t[0].key.clear();
    t[1].key.clear();
    return t;
  }();
  return table;
}

const OptionTable<VerifyOptions>& verify_option_table() {
  static const OptionTable<VerifyOptions> table = {lambda_option<VerifyOptions>()};
  return table;
}

const OptionTable<InspectOptions>& inspect_option_table() {
  using O = InspectOptions;
  static const OptionTable<O> table = [] {
    OptionSpec<O> no_hashes = flag_option<O>("no-hashes", "Skip dataset hashes (no raw data is read)",
                                             [](O& o) -> bool& { return o.skip_hashes; });
    no_hashes.key.clear();
    return OptionTable<O>{no_hashes};
  }();
  return table;
}

const OptionTable<SweepOptions>& sweep_option_table() {
  using O = SweepOptions;
  static const OptionTable<O> table = [] {
    OptionTable<O> t = {
        text_option<O>("case", "KEY", "Rerun one case by its repro key, pack(...), as printed with a failure",
                       [](O& o) -> std::string& { return o.case_key; }),
        text_option<O>("filter", "TEXT", "Run only cases whose key contains TEXT (selecting nothing: exit 2)",
                       [](O& o) -> std::string& { return o.filter; }),
    };
    // An empty key names no case: it left case_key unset and the whole sweep ran (a review's
    // `--case ''`, a shell variable never set).
    t[0].set = [](O& o, const OptionValue& v) {
      const std::string& key = std::get<std::string>(v);
      if (key.empty()) return Status(ErrorCode::kUsage, "an empty key names no case (give pack(...) as printed)");
      o.case_key = key;
      return Status();
    };
    for (OptionSpec<O>& s : t) s.key.clear();
    return t;
  }();
  return table;
}

}  // namespace ncert::certify
