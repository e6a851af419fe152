// Token text for fork reports: byte-level BPE and SentencePiece decoding, added tokens, the
// three vocabulary shapes, and safe rendering of bytes that are not valid UTF-8.
#include <gtest/gtest.h>

#include <fstream>

#include "certify/logits/vocab.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::scratch_file;

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = scratch_file(name);
  std::ofstream(path) << text;
  return path;
}

TEST(QuoteBytes, EscapesControlsQuotesAndInvalidUtf8) {
  EXPECT_EQ(quote_bytes("plain"), "\"plain\"");
  EXPECT_EQ(quote_bytes("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_bytes("line\n\ttab\r"), "\"line\\n\\ttab\\r\"");
  EXPECT_EQ(quote_bytes(std::string("\x00\x01\x7f", 3)), "\"\\x00\\x01\\x7f\"");
  EXPECT_EQ(quote_bytes("caf\xc3\xa9"), "\"caf\xc3\xa9\"");                            // valid 2-byte UTF-8 kept
  EXPECT_EQ(quote_bytes("\xe4\xbd\xa0\xe5\xa5\xbd"), "\"\xe4\xbd\xa0\xe5\xa5\xbd\"");  // CJK kept
  EXPECT_EQ(quote_bytes("\xe4\xbd"), "\"\\xe4\\xbd\"");                                // truncated sequence
  EXPECT_EQ(quote_bytes("\xff\xfe"), "\"\\xff\\xfe\"");                                // never valid
  EXPECT_EQ(quote_bytes("\xc0\xaf"), "\"\\xc0\\xaf\"");                                // overlong '/'
  EXPECT_EQ(quote_bytes("\xed\xa0\x80"), "\"\\xed\\xa0\\x80\"");                       // a surrogate
  EXPECT_EQ(quote_bytes("\xc2\x85"), "\"\\xc2\\x85\"");                                // C1 control (NEL)
}

TEST(Vocabulary, ByteLevelBpeDecodesEachCharacterToItsByte) {
  // "Ġ" is U+0120 = a space, "Ċ" U+010A = a newline; "Ã©" is the two bytes of "é".
  const Vocabulary v = Vocabulary::from_strings({"\u0120the", "\u010a", "\u00c3\u00a9", "\u00e4\u00bd", "\u0142"},
                                                Vocabulary::Decoding::kByteLevel);
  EXPECT_EQ(v.bytes(0), " the");
  EXPECT_EQ(v.render(0), "\" the\"");
  EXPECT_EQ(v.render(1), "\"\\n\"");
  EXPECT_EQ(v.render(2), "\"\xc3\xa9\"");
  // Half of a CJK character alone is not valid UTF-8; it is shown as bytes...
  EXPECT_EQ(v.render(3), "\"\\xe4\\xbd\"");
  // ... and joined with the token holding the other half it reassembles: U+0142 stands for
  // byte 0xA0 (the 67th of the bytes GPT-2 remaps), and e4 bd a0 is U+4F60.
  const Vocabulary w = Vocabulary::from_strings({"\u00e4\u00bd", "\u0142"}, Vocabulary::Decoding::kByteLevel);
  EXPECT_EQ(w.bytes(1), "\xa0");
  EXPECT_EQ(w.render(1), "\"\\xa0\"");
  EXPECT_EQ(w.render_sequence({0, 1}), "\"\xe4\xbd\xa0\"");
  EXPECT_EQ(v.render(99), "<id 99?>");
  EXPECT_EQ(v.render(-1), "<id -1?>");
}

TEST(Vocabulary, MetaspaceAndByteFallback) {
  const Vocabulary v =
      Vocabulary::from_strings({"\u2581hello", "<0x0A>", "<0xE4>", "<0xZZ>"}, Vocabulary::Decoding::kMetaspace);
  EXPECT_EQ(v.render(0), "\" hello\"");
  EXPECT_EQ(v.render(1), "\"\\n\"");
  EXPECT_EQ(v.render(2), "\"\\xe4\"");
  EXPECT_EQ(v.render(3), "\"<0xZZ>\"");  // not a byte token: shown as written
}

TEST(Vocabulary, LoadsAJsonListOfStrings) {
  const Vocabulary v = *Vocabulary::load(write_file("list.json", R"(["a", "b\n", "\u00e9"])"));
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v.decoding(), Vocabulary::Decoding::kRaw);
  EXPECT_EQ(v.render(1), "\"b\\n\"");
  EXPECT_EQ(v.render(2), "\"\xc3\xa9\"");
}

TEST(Vocabulary, LoadsTokenizerJsonShapes) {
  // BPE with a ByteLevel decoder and an added special token shown verbatim.
  auto bpe = Vocabulary::load(write_file("bpe.json", R"({
    "added_tokens": [{"id": 3, "content": "<|im_end|>", "special": true}],
    "model": {"type": "BPE", "vocab": {"\u0120Hi": 0, "!": 1, "\u010a": 2}},
    "decoder": {"type": "ByteLevel"}})"));
  ASSERT_TRUE(bpe.ok()) << bpe.status().to_string();
  EXPECT_EQ(bpe->decoding(), Vocabulary::Decoding::kByteLevel);
  EXPECT_EQ(bpe->render_sequence({0, 1, 2, 3}), "\" Hi!\\n<|im_end|>\"");
  // Unigram (SentencePiece) with a Sequence decoder (Replace + ByteFallback).
  auto uni = Vocabulary::load(write_file("uni.json", R"({
    "model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["\u2581world", -3.5], ["<0x21>", -9.0]]},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}]}})"));
  ASSERT_TRUE(uni.ok()) << uni.status().to_string();
  EXPECT_EQ(uni->decoding(), Vocabulary::Decoding::kMetaspace);
  EXPECT_EQ(uni->render_sequence({1, 2}), "\" world!\"");
}

TEST(Vocabulary, RefusesWhatIsNotAVocabulary) {
  EXPECT_EQ(Vocabulary::load(scratch_file("missing.json")).status().code(), ErrorCode::kFileNotFound);
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"broken.json", "{\"model\": "},
           {"object.json", R"({"vocab": {"a": 0}})"},
           {"mixed.json", R"(["a", 3])"},
           {"badid.json", R"({"model": {"vocab": {"a": "zero"}}})"},
           {"huge.json", R"({"model": {"vocab": {"a": 99999999999}}})"},
           {"negative.json", R"({"model": {"vocab": {"a": -1}}})"},
           {"badadded.json", R"({"model": {"vocab": {"a": 0}}, "added_tokens": [{"id": 1}]})"}}) {
    SCOPED_TRACE(name);
    auto v = Vocabulary::load(write_file(name, text));
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), ErrorCode::kVocabFileInvalid);
    EXPECT_NE(v.status().message().find(name), std::string::npos) << v.status().message();
  }
}

}  // namespace
}  // namespace ncert::certify
