#include "certify/logits/vocab.h"

#include <array>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "certify/io/input_file.h"

namespace ncert::certify {

namespace {

// Plain (unordered) json: report.h's ncert::certify::Json is ordered_json.
using VocabJson = nlohmann::json;

// A tokenizer.json of a 150k vocabulary is ~7 MB (11 MB with merges); 512 MiB is far beyond any
// real one and keeps a wrong path (a dump, a model file) from being read into memory.
constexpr std::uintmax_t kMaxVocabFileBytes = 512ull << 20;

/// GPT-2's bytes_to_unicode inverted: the code point standing for each byte. Printable Latin-1
/// bytes stand for themselves; the other 68 map to U+0100.. in byte order.
const std::array<char32_t, 256>& byte_to_codepoint() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int n = 0;
    for (int b = 0; b < 256; ++b)
      t[static_cast<std::size_t>(b)] = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    return t;
  }();
  return table;
}

/// Decodes one UTF-8 sequence at s[i]; returns its length (0 if invalid) and the code point.
std::size_t utf8_next(std::string_view s, std::size_t i, char32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len;
  char32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    v = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    v = (v << 6) | (d & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string decode_byte_level(std::string_view token) {
  static const std::array<int, 512> inverse = [] {
    std::array<int, 512> inv{};
    inv.fill(-1);
    const auto& fwd = byte_to_codepoint();
    for (int b = 0; b < 256; ++b) inv[static_cast<std::size_t>(fwd[static_cast<std::size_t>(b)])] = b;
    return inv;
  }();
  std::string out;
  for (std::size_t i = 0; i < token.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_next(token, i, &cp);
    if (n == 0) {  // not UTF-8 (cannot come from JSON, but from_strings may pass anything)
      out += token[i++];
      continue;
    }
    if (cp < inverse.size() && inverse[cp] >= 0)
      out += static_cast<char>(inverse[cp]);
    else
      append_utf8(out, cp);  // a character outside the byte alphabet: keep it
    i += n;
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string decode_metaspace(std::string_view token) {
  // "<0xNN>": one byte of a byte-fallback sequence.
  if (token.size() == 6 && token.substr(0, 3) == "<0x" && token[5] == '>') {
    const int h = hex_digit(token[3]), l = hex_digit(token[4]);
    if (h >= 0 && l >= 0) return std::string(1, static_cast<char>(h * 16 + l));
  }
  static constexpr std::string_view kMeta = "\xE2\x96\x81";  // U+2581
  std::string out;
  for (std::size_t i = 0; i < token.size();) {
    if (token.substr(i, 3) == kMeta) {
      out += ' ';
      i += 3;
    } else {
      out += token[i++];
    }
  }
  return out;
}

/// Whether a decoder / pre_tokenizer description (possibly a Sequence) contains a step of `type`.
bool has_step(const VocabJson& node, std::string_view type) {
  if (!node.is_object()) return false;
  if (node.value("type", std::string()) == type) return true;
  for (const char* key : {"decoders", "pretokenizers"}) {
    if (node.contains(key) && node[key].is_array()) {
      for (const VocabJson& d : node[key]) {
        if (has_step(d, type)) return true;
      }
    }
  }
  return false;
}

Status invalid(const std::string& path, const std::string& why) {
  return Status(ErrorCode::kVocabFileInvalid, path + ": " + why);
}

}  // namespace

std::string quote_bytes(std::string_view s) {
  std::string out = "\"";
  char buf[8];
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (c == '\r') {
      out += "\\r";
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    } else {
      char32_t cp = 0;
      const std::size_t n = utf8_next(s, i, &cp);
      // Invalid UTF-8 and the C1 controls are shown as bytes.
      if (n == 0 || (cp >= 0x80 && cp < 0xA0)) {
        for (std::size_t k = 0; k < std::max<std::size_t>(n, 1); ++k) {
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i + k]));
          out += buf;
        }
        i += std::max<std::size_t>(n, 1);
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
    }
  }
  return out + "\"";
}

Vocabulary Vocabulary::from_strings(std::vector<std::string> tokens, Decoding decoding, std::vector<bool> special) {
  Vocabulary v;
  v.present_.assign(tokens.size(), true);
  v.tokens_ = std::move(tokens);
  v.special_ = std::move(special);
  v.special_.resize(v.tokens_.size(), false);
  v.decoding_ = decoding;
  return v;
}

Result<Vocabulary> Vocabulary::load(const std::string& path) {
  // A regular file only, opened without blocking (a FIFO named as the vocabulary is refused).
  auto in = InputFile::open(path);
  if (!in.ok()) {
    if (in.status().code() != ErrorCode::kFileNotFound) return in.status();
    return Status(ErrorCode::kFileNotFound, path + ": cannot open the vocabulary file");
  }
  const std::uint64_t size = in->size();
  if (size > kMaxVocabFileBytes) {
    return invalid(path, std::to_string(size) + " bytes; a vocabulary file is at most " +
                             std::to_string(kMaxVocabFileBytes >> 20) + " MiB");
  }
  NCERT_ASSIGN_OR_RETURN(std::string text, in->read_all());
  // nlohmann throws on malformed input: this is the JSON edge, converted to a status here.
  VocabJson j = VocabJson::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid(path, "not valid JSON");

  Vocabulary v;
  auto put = [&](std::int64_t id, const std::string& s, bool special) -> Status {
    if (id < 0 || id > (1 << 24)) return invalid(path, "token id " + std::to_string(id) + " outside [0, 2^24]");
    const auto k = static_cast<std::size_t>(id);
    if (k >= v.tokens_.size()) {
      v.tokens_.resize(k + 1);
      v.present_.resize(k + 1, false);
      v.special_.resize(k + 1, false);
    }
    v.tokens_[k] = s;
    v.present_[k] = true;
    v.special_[k] = special;
    return Status();
  };
  if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_string()) return invalid(path, "entry " + std::to_string(i) + " of the list is not a string");
      NCERT_RETURN_IF_ERROR(put(static_cast<std::int64_t>(i), j[i].get<std::string>(), false));
    }
    return v;
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object() || !j["model"].contains("vocab")) {
    return invalid(path, "neither a JSON list of token strings nor a tokenizer.json (no model.vocab)");
  }
  const VocabJson& vocab = j["model"]["vocab"];
  if (vocab.is_object()) {  // BPE, WordPiece: {"token": id}
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer())
        return invalid(path, "model.vocab[\"" + it.key() + "\"] is not an integer id");
      NCERT_RETURN_IF_ERROR(put(it.value().get<std::int64_t>(), it.key(), false));
    }
  } else if (vocab.is_array()) {  // Unigram: [[piece, score], ...], index = id
    for (std::size_t i = 0; i < vocab.size(); ++i) {
      const VocabJson& e = vocab[i];
      if (!e.is_array() || e.empty() || !e[0].is_string()) {
        return invalid(path, "model.vocab entry " + std::to_string(i) + " is not [piece, score]");
      }
      NCERT_RETURN_IF_ERROR(put(static_cast<std::int64_t>(i), e[0].get<std::string>(), false));
    }
  } else {
    return invalid(path, "model.vocab is neither an object nor a list");
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const VocabJson& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string()) {
        return invalid(path, "an added_tokens entry lacks an integer id or a string content");
      }
      NCERT_RETURN_IF_ERROR(put(t["id"].get<std::int64_t>(), t["content"].get<std::string>(), true));
    }
  }
  const VocabJson decoder = j.value("decoder", VocabJson());
  const VocabJson pre = j.value("pre_tokenizer", VocabJson());
  if (has_step(decoder, "ByteLevel") || has_step(pre, "ByteLevel")) {
    v.decoding_ = Decoding::kByteLevel;
  } else if (has_step(decoder, "Metaspace") || has_step(decoder, "Replace") || has_step(decoder, "ByteFallback") ||
             has_step(pre, "Metaspace")) {
    v.decoding_ = Decoding::kMetaspace;
  }
  return v;
}

std::string Vocabulary::bytes(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !present_[static_cast<std::size_t>(id)]) return "";
  const std::string& t = tokens_[static_cast<std::size_t>(id)];
  if (special_[static_cast<std::size_t>(id)]) return t;
  switch (decoding_) {
    case Decoding::kByteLevel:
      return decode_byte_level(t);
    case Decoding::kMetaspace:
      return decode_metaspace(t);
    case Decoding::kRaw:
      break;
  }
  return t;
}

std::string Vocabulary::render(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !present_[static_cast<std::size_t>(id)]) {
    return "<id " + std::to_string(id) + "?>";
  }
  return quote_bytes(bytes(id));
}

std::string Vocabulary::render_sequence(const std::vector<std::int32_t>& ids) const {
  std::string all;
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !present_[static_cast<std::size_t>(id)]) {
      all += "<id " + std::to_string(id) + "?>";
    } else {
      all += bytes(id);
    }
  }
  return quote_bytes(all);
}

}  // namespace ncert::certify
