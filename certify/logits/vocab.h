// This header defines Vocabulary: token ids to displayable text for `ncert forks --vocab`.
// Accepts a JSON list of token strings (index = id) or a Hugging Face tokenizer.json (BPE or
// WordPiece "model.vocab" as an object, Unigram's as a list of [piece, score], plus
// "added_tokens"). Token strings are decoded to bytes the way the tokenizer's decoder would:
//   byte-level BPE (GPT-2, Qwen, Llama 3): each character stands for one byte (bytes_to_unicode)
//   metaspace (SentencePiece): U+2581 is a space, "<0xNN>" byte-fallback tokens are bytes
//   otherwise the string's own UTF-8
// and rendered quoted and escaped: valid printable UTF-8 as is, \n \t \r \" \\, any other control
// byte or byte that is not part of valid UTF-8 as \xNN. A token alone may be half a character;
// render_sequence() joins the bytes of consecutive tokens first, so split characters reassemble.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reference/status.h"

namespace ncert::certify {

class Vocabulary {
 public:
  enum class Decoding : std::uint8_t { kRaw, kByteLevel, kMetaspace };

  /// kFileNotFound / kIo if unreadable; kVocabFileInvalid (naming the file and what is wrong)
  /// if it is neither form.
  static Result<Vocabulary> load(const std::string& path);
  /// From token strings already in memory (tests, the JSON-list form).
  static Vocabulary from_strings(std::vector<std::string> tokens, Decoding decoding, std::vector<bool> special = {});

  std::size_t size() const { return tokens_.size(); }
  Decoding decoding() const { return decoding_; }
  /// The token's bytes after decoding ("" for an unknown id).
  std::string bytes(std::int32_t id) const;
  /// One token, quoted and escaped; ids without an entry render as <id N?>.
  std::string render(std::int32_t id) const;
  /// Several tokens' bytes joined, then quoted and escaped.
  std::string render_sequence(const std::vector<std::int32_t>& ids) const;

 private:
  std::vector<std::string> tokens_;  ///< as stored in the file (UTF-8); "" for holes
  std::vector<bool> present_;
  std::vector<bool> special_;  ///< added/special tokens: shown verbatim, never byte-decoded
  Decoding decoding_ = Decoding::kRaw;
};

/// Quotes and escapes arbitrary bytes for display (see the header comment).
std::string quote_bytes(std::string_view bytes);

}  // namespace ncert::certify
