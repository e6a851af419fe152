// The C++ export example of README.md "Install", verbatim between the markers, with a main that
// feeds it three greedy decode steps over a vocabulary of 8. Usage: readme_example OUT.h5
#include <cstdio>
#include <string>
#include <vector>

// ---- README example begins ----
#include "certify/io/dump_builder.h"

// Writes one greedy decode loop: logits [T, V] f32 (the raw rows), tokens [T] i32 (emitted).
ncert::Status export_logits(const std::string& path, const std::vector<float>& logits,
                            const std::vector<std::int32_t>& tokens, ncert::Index vocab) {
  using ncert::DType;
  using namespace ncert::certify;
  const auto t = static_cast<ncert::Index>(tokens.size());
  NCERT_ASSIGN_OR_RETURN(auto dump, DumpBuilder::create(path, {.engine = "my-engine", .build = "abc123"}));
  NCERT_RETURN_IF_ERROR(dump.add_logits_run({.name = "greedy",
                                             .vocab = vocab,
                                             .tokens = DumpArray(DType::kI32, tokens, {t}),
                                             .logits = DumpArray(DType::kF32, logits, {t, vocab})}));
  return dump.close();  // validated with the reader's rules; the file appears only here
}
// ---- README example ends ----

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: readme_example OUT.h5\n");
    return 2;
  }
  // Each row's maximum is the emitted token (the lowest id among equal maxima).
  const std::vector<float> logits = {0.5f,  -1.0f, 3.25f, 0.0f, 2.0f, -0.5f, 1.0f, 3.0f,  4.0f, 1.5f, -2.0f, 0.25f,
                                     3.75f, 0.0f,  -1.0f, 2.5f, 0.0f, 0.0f,  1.0f, -3.0f, 0.5f, 1.0f, 0.75f, -0.25f};
  const ncert::Status st = export_logits(argv[1], logits, {2, 0, 2}, 8);
  if (!st.ok()) {
    std::fprintf(stderr, "readme_example: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
