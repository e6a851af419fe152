#include "certify/cli/app.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "certify/report/report.h"

namespace ncert::cli {

namespace {

/// Optimal string alignment distance (transpositions count once: "chekc" -> "check" is 1).
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

/// The name in `names` closest to `typo`: one it begins (counted as distance 1), else the
/// first nearest within distance 2; "" when none is that close.
std::string nearest(std::string_view typo, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_d = 3;
  for (const std::string& name : names) {
    const std::size_t d = name.rfind(typo, 0) == 0 && !typo.empty() ? 1 : distance(typo, name);
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  return best;
}

std::vector<const CLI::App*> subcommands(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) out.push_back(s);
  return out;
}

/// An option's flag names ("--json"), long first.
std::vector<std::string> flag_names(const CLI::Option* o) {
  std::vector<std::string> out;
  for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
  for (const std::string& s : o->get_snames()) out.push_back("-" + s);
  return out;
}

/// troff text: backslashes and leading dots/quotes escaped.
std::string troff(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

}  // namespace

void build_app(CLI::App& app, Action& action) {
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", std::string(certify::ncert_version()));
  app.footer("Exit codes: 0 pass, 1 fail, 2 usage, 3 input refused, 4 internal error, 5 report not written.");
  register_check(app, action);
  register_compare(app, action);
  register_witness(app, action);
  register_forks(app, action);
  register_sweep(app, action);
  register_inspect(app, action);
  register_campaign(app, action);
  register_demo(app, action);
}

bool is_subcommand(const CLI::App& app, std::string_view name) {
  for (const CLI::App* s : subcommands(app)) {
    if (s->get_name() == name) return true;
  }
  return false;
}

std::string suggest_subcommand(const CLI::App& app, std::string_view typo) {
  std::vector<std::string> names;
  for (const CLI::App* s : subcommands(app)) names.push_back(s->get_name());
  return nearest(typo, names);
}

std::string unknown_option(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty()) return "";
  const CLI::App* command = nullptr;
  for (const CLI::App* s : subcommands(app)) {
    if (s->get_name() == args[0]) command = s;
  }
  if (command == nullptr) return "";
  std::vector<std::string> known;
  for (const CLI::App* owner : {command, &app}) {
    for (const CLI::Option* o : owner->get_options()) {
      for (const std::string& n : flag_names(o)) known.push_back(n);
    }
  }
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i].rfind("--", 0) != 0 || args[i].size() == 2) continue;
    const std::string name = args[i].substr(0, args[i].find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::vector<std::string> long_names;
    for (const std::string& k : known) {
      if (k.rfind("--", 0) == 0) long_names.push_back(k);
    }
    const std::string best = nearest(name, long_names);
    return "unknown option " + name + " for `ncert " + args[0] + "`" +
           (best.empty() ? std::string() : "; did you mean " + best + "?");
  }
  return "";
}

std::string bash_completion(const CLI::App& app) {
  std::ostringstream os;
  os << "# bash completion for ncert, generated from its command line (ncert-docgen).\n"
     << "_ncert() {\n"
     << "  local cur prev cmd\n"
     << "  cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
     << "  prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
     << "  cmd=\"${COMP_WORDS[1]}\"\n"
     << "  if [[ $COMP_CWORD -eq 1 ]]; then\n"
     << "    COMPREPLY=($(compgen -W \"";
  for (const CLI::App* s : subcommands(app)) os << s->get_name() << " ";
  os << "--help --version\" -- \"$cur\"))\n"
     << "    return\n"
     << "  fi\n"
     << "  case \"$cmd\" in\n";
  for (const CLI::App* s : subcommands(app)) {
    std::string flags, value_flags;
    for (const CLI::Option* o : s->get_options()) {
      if (o->get_positional()) continue;
      for (const std::string& n : flag_names(o)) {
        flags += n + " ";
        if (o->get_type_size() != 0) value_flags += n + "|";
      }
    }
    os << "    " << s->get_name() << ")\n";
    if (!value_flags.empty()) {
      value_flags.pop_back();
      // A flag that takes a value: files (PATH, DUMP) complete as files, the rest as nothing.
      os << "      case \"$prev\" in " << value_flags << ") COMPREPLY=($(compgen -f -- \"$cur\")); return;; esac\n";
    }
    os << "      if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"" << flags << "\" -- \"$cur\"));\n"
       << "      else COMPREPLY=($(compgen -f -- \"$cur\")); fi\n"
       << "      ;;\n";
  }
  os << "  esac\n"
     << "}\n"
     << "complete -o filenames -F _ncert ncert\n";
  return os.str();
}

std::string man_page(const CLI::App& app) {
  std::ostringstream os;
  os << ".\\\" Generated from ncert's command line by ncert-docgen; do not edit.\n"
     << ".TH NCERT 1 \"\" \"ncert " << certify::ncert_version() << "\" \"User Commands\"\n"
     << ".SH NAME\nncert \\- certify the numerics of an LLM inference engine build from its dumps\n"
     << ".SH SYNOPSIS\n.B ncert\n.I command\n[\\fIoptions\\fR] \\fIinputs\\fR...\n"
     << ".SH DESCRIPTION\n"
     << "Engine teams export tensors from their engine to HDF5 dumps (the format: docs/dump-format.md);\n"
     << "ncert recomputes what matters on the CPU and answers PASS or FAIL, with the evidence.\n"
     << "Every command writes a human summary, and with \\fB\\-\\-json\\fR a machine-readable report.\n"
     << ".SH COMMANDS\n";
  for (const CLI::App* s : subcommands(app)) {
    os << ".SS " << s->get_name();
    for (const CLI::Option* o : s->get_options()) {
      if (o->get_positional()) os << " " << o->get_name();
    }
    os << "\n" << troff(s->get_description()) << "\n";
    for (const CLI::Option* o : s->get_options()) {
      if (o->get_positional()) continue;
      std::string names;
      for (const std::string& n : flag_names(o))
        names += (names.empty() ? "" : ", ") + std::string("\\fB") + troff(n) + "\\fR";
      os << ".TP\n" << names;
      if (o->get_type_size() != 0 && !o->get_type_name().empty()) os << " \\fI" << troff(o->get_type_name()) << "\\fR";
      os << "\n" << troff(o->get_description()) << "\n";
    }
  }
  os << ".SH EXIT STATUS\n"
     << ".TP\n0\nevery check passed\n.TP\n1\na check failed\n.TP\n2\nusage error\n"
     << ".TP\n3\ninput refused (unreadable, malformed or unsafe dump; the HDF5 library crashed or hung on it)\n"
     << ".TP\n4\ninternal error\n.TP\n5\nthe verdict was PASS but a report could not be written\n"
     << ".TP\n130\ninterrupted (SIGINT)\n"
     << ".SH ENVIRONMENT\n.TP\nNCERT_ISOLATION=off\nrun commands in-process instead of in a supervised child (for a "
        "debugger)\n"
     << ".TP\nOMP_NUM_THREADS\nthe default of \\fB\\-\\-threads\\fR\n"
     << ".SH SEE ALSO\nThe documentation installed with ncert (share/doc/ncert): cli.md, dump-format.md,\n"
     << "error-bounds.md, campaigns.md.\n";
  return os.str();
}

}  // namespace ncert::cli
