#include "certify/cli/cli_common.h"
#include "certify/commands/forks.h"

namespace ncert::cli {

void register_forks(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    std::string a, b;
    std::vector<std::string> pairs;
    bool matched_history = false;
    LogitErrorOptions errors;
    bool require_identical = false;
    std::string vocab;
    int context = 8;
    std::string require;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("forks", "Find where two runs' token streams diverge and classify each wording fork");
  cmd->add_option("A", opts->a, "First dump")->required();
  cmd->add_option("B", opts->b, "Second dump")->required();
  add_pair_option(cmd, &opts->pairs);
  cmd->add_flag("--matched-history", opts->matched_history,
                "B was teacher-forced on A's tokens: every position whose emissions differ is a fork");
  add_logit_error_options(cmd, &opts->errors,
                          "Absolute error bound of every logit of each run (the envelope is twice it)");
  cmd->add_flag("--require-identical", opts->require_identical,
                "Fail on any fork (and on streams of different lengths)");
  cmd->add_option("--vocab", opts->vocab, "Token texts: a JSON list of strings or a tokenizer.json")->type_name("FILE");
  cmd->add_option("--context", opts->context, "Shared-history tokens shown per fork (default 8)")
      ->check(CLI::Range(0, 4096));
  add_require_option(cmd, &opts->require);
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      certify::ForksOptions o;
      o.a = opts->a;
      o.b = opts->b;
      o.reader.memory_limit = opts->common.max_memory;
      o.pairs = split_pairs(opts->pairs);
      o.matched_history = opts->matched_history;
      o.logit_error = opts->errors.absolute();
      o.lambda = opts->errors.lambda;
      o.require_identical = opts->require_identical;
      o.vocab_file = opts->vocab;
      o.context = opts->context;
      o.require = requirement(opts->require);
      return run_reported("forks", opts->common, {o.a, o.b, o.vocab_file}, [&] { return certify::run_forks(o); });
    };
  });
}

}  // namespace ncert::cli
