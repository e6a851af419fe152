#include "certify/cli/cli_common.h"
#include "certify/commands/compare.h"

namespace ncert::cli {

namespace {
// CLI11 validator: a policy string that parses (usage error otherwise).
std::string check_policy(const std::string& s) {
  auto p = certify::parse_policy(s);
  return p.ok() ? std::string() : p.status().message();
}
std::string check_tensor_policy(const std::string& s) {
  auto p = certify::parse_tensor_policy(s);
  return p.ok() ? std::string() : p.status().message();
}
}  // namespace

void register_compare(CLI::App& app, Action& action) {
  struct Opts {
    CommonOptions common;
    std::string a, b;
    std::vector<std::string> pairs;
    bool matched_history = false;
    std::string policy = "bitwise";
    std::string tensor_policy;
    bool allow_missing = false;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("compare", "Full-vocabulary F32 comparison of logits runs and /tensors between two dumps");
  cmd->add_option("A", opts->a, "First dump")->required();
  cmd->add_option("B", opts->b, "Second dump")->required();
  add_pair_option(cmd, &opts->pairs);
  cmd->add_flag("--matched-history", opts->matched_history,
                "Treat every row as matched (teacher-forced runs: B was fed A's tokens)");
  cmd->add_option("--policy", opts->policy, "bitwise (default), ulp:N, abs:A[,rel:R], kl:X or top1")
      ->check(CLI::Validator(check_policy, "POLICY"));
  cmd->add_option("--tensor-policy", opts->tensor_policy,
                  "Policy for every tensor, overriding their compare attributes")
      ->check(CLI::Validator(check_tensor_policy, "POLICY"));
  cmd->add_flag("--allow-missing", opts->allow_missing, "Runs or tensors present on one side only pass");
  add_common_options(cmd, &opts->common);
  cmd->callback([opts, &action] {
    action = [opts] {
      apply_threads(opts->common);
      certify::CompareOptions o;
      o.a = opts->a;
      o.b = opts->b;
      o.reader.memory_limit = opts->common.max_memory;
      o.pairs = split_pairs(opts->pairs);
      o.matched_history = opts->matched_history;
      o.policy = *certify::parse_policy(opts->policy);
      if (!opts->tensor_policy.empty()) o.tensor_policy = *certify::parse_tensor_policy(opts->tensor_policy);
      o.allow_missing = opts->allow_missing;
      return run_reported("compare", opts->common, {o.a, o.b}, [&] { return certify::run_compare(o); });
    };
  });
}

}  // namespace ncert::cli
