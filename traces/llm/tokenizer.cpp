#include "traces/llm/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <queue>

#include "core/error.hpp"
#include "traces/llm/gguf.hpp"

namespace kvsim::llm {

namespace {

// ---- UTF-8 and character classes ------------------------------------------------------------------

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else if (cp < 0x800) {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(char(0xE0 | (cp >> 12)));
    s.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(char(0xF0 | (cp >> 18)));
    s.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
}

// Length of the UTF-8 sequence at s[i]; an invalid byte counts as a 1-byte character (so every
// byte of any input is kept and round-trips through the byte-level vocabulary).
size_t utf8_len(const std::string& s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t c = b(i);
  auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  if (c < 0x80) { *cp = c; return 1; }
  if ((c & 0xE0) == 0xC0 && c >= 0xC2 && cont(i + 1)) { *cp = ((c & 0x1Fu) << 6) | (b(i + 1) & 0x3Fu); return 2; }
  if ((c & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
    *cp = ((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6) | (b(i + 2) & 0x3Fu);
    if (*cp >= 0x800) return 3;
  }
  if ((c & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
    *cp = ((c & 0x07u) << 18) | ((b(i + 1) & 0x3Fu) << 12) | ((b(i + 2) & 0x3Fu) << 6) | (b(i + 3) & 0x3Fu);
    if (*cp >= 0x10000 && *cp <= 0x10FFFF) return 4;
  }
  *cp = 0xFFFD;  // classified as "other"
  return 1;
}

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

struct Range { uint32_t lo, hi; };

// \p{N}: decimal digits of the common scripts, super/subscripts, fractions, number forms, circled
// and fullwidth digits.
constexpr Range kNumbers[] = {
    {0x30, 0x39}, {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9}, {0x7C0, 0x7C9},
    {0x966, 0x96F}, {0x9E6, 0x9EF}, {0xA66, 0xA6F}, {0xAE6, 0xAEF}, {0xB66, 0xB6F}, {0xBE6, 0xBF2},
    {0xC66, 0xC6F}, {0xCE6, 0xCEF}, {0xD66, 0xD78}, {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF33},
    {0x1040, 0x1049}, {0x17E0, 0x17E9}, {0x1810, 0x1819}, {0x2070, 0x2070}, {0x2074, 0x2079},
    {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF},
    {0x2776, 0x2793}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A}, {0x3192, 0x3195},
    {0x3220, 0x3229}, {0x3248, 0x324F}, {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF},
    {0xFF10, 0xFF19}, {0x1D7CE, 0x1D7FF}, {0x1F100, 0x1F10C},
};

// Non-ASCII code points that are neither letters nor numbers: Latin-1 punctuation and symbols,
// modifier symbols, combining marks, general punctuation through the symbol blocks, CJK
// punctuation, small/fullwidth forms, private use, specials and emoji.
constexpr Range kNotLetters[] = {
    {0x80, 0xA9}, {0xAB, 0xB4}, {0xB6, 0xB9}, {0xBB, 0xBF}, {0xD7, 0xD7}, {0xF7, 0xF7},
    {0x2C2, 0x2C5}, {0x2D2, 0x2DF}, {0x2E5, 0x2EB}, {0x2ED, 0x2ED}, {0x2EF, 0x36F}, {0x375, 0x375},
    {0x37E, 0x37E}, {0x384, 0x385}, {0x387, 0x387}, {0x3F6, 0x3F6}, {0x482, 0x489}, {0x55A, 0x55F},
    {0x589, 0x58A}, {0x591, 0x5C7}, {0x5F3, 0x5F4}, {0x600, 0x61F}, {0x64B, 0x66D}, {0x670, 0x670},
    {0x6D4, 0x6D4}, {0x6D6, 0x6ED}, {0x900, 0x903}, {0x93A, 0x93C}, {0x93E, 0x94F}, {0x951, 0x957},
    {0x962, 0x965}, {0x970, 0x970}, {0xE31, 0xE31}, {0xE34, 0xE3F}, {0xE47, 0xE4F}, {0xE5A, 0xE5B},
    {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x2000, 0x2070}, {0x2072, 0x207E}, {0x2080, 0x208F},
    {0x209D, 0x2101}, {0x2103, 0x2106}, {0x2108, 0x2109}, {0x2114, 0x2114}, {0x2116, 0x2118},
    {0x211E, 0x2123}, {0x2125, 0x2125}, {0x2127, 0x2127}, {0x2129, 0x2129}, {0x212E, 0x212E},
    {0x213A, 0x213B}, {0x2140, 0x2144}, {0x214A, 0x214D}, {0x214F, 0x2182}, {0x2185, 0x2BFF},
    {0x2CE5, 0x2CEA}, {0x2CF9, 0x2CFF}, {0x2E00, 0x2E7F}, {0x2E80, 0x2FFF}, {0x3000, 0x3004},
    {0x3007, 0x3030}, {0x3036, 0x303A}, {0x303D, 0x303F}, {0x3099, 0x309C}, {0x30A0, 0x30A0},
    {0x30FB, 0x30FB}, {0x3190, 0x319F}, {0x31C0, 0x31EF}, {0x3200, 0x33FF}, {0x4DC0, 0x4DFF},
    {0xA490, 0xA4CF}, {0xD800, 0xF8FF}, {0xFD3E, 0xFD3F}, {0xFE00, 0xFE6F}, {0xFF00, 0xFF20},
    {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65}, {0xFFE0, 0xFFFF}, {0x1D000, 0x1D7FF}, {0x1F000, 0x1FFFF},
    {0xE0000, 0x10FFFF},
};

template <size_t N>
bool in(const Range (&table)[N], uint32_t c) {
  for (const Range& r : table)
    if (c >= r.lo && c <= r.hi) return true;
  return false;
}

enum class Cat { letter, number, space, other };

Cat category(uint32_t c) {
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return Cat::letter;
    if (c >= '0' && c <= '9') return Cat::number;
    return is_space(c) ? Cat::space : Cat::other;
  }
  if (is_space(c)) return Cat::space;
  if (in(kNumbers, c)) return Cat::number;
  if (c == 0xFFFD || in(kNotLetters, c)) return Cat::other;
  return Cat::letter;
}

// GPT-2's byte-to-unicode table: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in order, so every byte has a visible, non-space character.
struct ByteMap {
  std::array<std::string, 256> to_char;
  std::unordered_map<uint32_t, uint8_t> to_byte;
  ByteMap() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = printable ? uint32_t(b) : next++;
      append_utf8(to_char[size_t(b)], cp);
      to_byte[cp] = uint8_t(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

struct Cp { uint32_t cp; size_t pos, len; };

std::vector<Cp> code_points(const std::string& s) {
  std::vector<Cp> v;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = utf8_len(s, i, &cp);
    v.push_back({cp, i, n});
    i += n;
  }
  return v;
}

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// Length in code points of an English contraction ('s 't 'm 'd 're 've 'll) starting at i, or 0.
// Llama 3's pattern matches them case-insensitively, GPT-2's does not.
size_t contraction(const std::vector<Cp>& cps, size_t i, size_t e, bool ignore_case) {
  if (cps[i].cp != '\'' || i + 1 >= e) return 0;
  auto at = [&](size_t k) { return k < e ? (ignore_case ? ascii_lower(cps[k].cp) : cps[k].cp) : 0u; };
  const uint32_t a = at(i + 1), n2 = at(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && n2 == 'e') || (a == 'v' && n2 == 'e') || (a == 'l' && n2 == 'l')) return 3;
  return 0;
}

// The GPT-2 pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ over
// code points [b, e), appending the pieces.
void gpt2_split(const std::string& s, const std::vector<Cp>& cps, size_t b, size_t e, std::vector<std::string>& out) {
  auto piece = [&](size_t i, size_t j) { out.push_back(s.substr(cps[i].pos, cps[j - 1].pos + cps[j - 1].len - cps[i].pos)); };
  size_t i = b;
  while (i < e) {
    const uint32_t c = cps[i].cp;
    if (const size_t len = contraction(cps, i, e, false)) {
      piece(i, i + len);
      i += len;
      continue;
    }
    const size_t s0 = (c == ' ' && i + 1 < e && category(cps[i + 1].cp) != Cat::space) ? i + 1 : i;
    const Cat cat = category(cps[s0].cp);
    if (cat != Cat::space) {
      size_t j = s0 + 1;
      while (j < e && category(cps[j].cp) == cat) ++j;
      piece(i, j);
      i = j;
      continue;
    }
    size_t r = i;
    while (r < e && category(cps[r].cp) == Cat::space) ++r;
    // \s+(?!\S): a run followed by a non-space gives up its last character to the next piece.
    const size_t j = (r == e || r - i == 1) ? r : r - 1;
    piece(i, j);
    i = j;
  }
}

// Llama 3's pattern (llama.cpp's "llama-bpe"):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void llama3_split(const std::string& s, const std::vector<Cp>& cps, size_t b, size_t e, std::vector<std::string>& out) {
  auto piece = [&](size_t i, size_t j) { out.push_back(s.substr(cps[i].pos, cps[j - 1].pos + cps[j - 1].len - cps[i].pos)); };
  auto cat = [&](size_t k) { return category(cps[k].cp); };
  auto newline = [&](size_t k) { return cps[k].cp == '\r' || cps[k].cp == '\n'; };
  size_t i = b;
  while (i < e) {
    const uint32_t c = cps[i].cp;
    if (const size_t len = contraction(cps, i, e, true)) {
      piece(i, i + len);
      i += len;
      continue;
    }
    const Cat ci = cat(i);
    // A letter run, optionally led by one character that is not a newline, letter or digit.
    if (ci == Cat::letter || (ci != Cat::number && !newline(i) && i + 1 < e && cat(i + 1) == Cat::letter)) {
      size_t j = i + 1;
      while (j < e && cat(j) == Cat::letter) ++j;
      piece(i, j);
      i = j;
      continue;
    }
    if (ci == Cat::number) {  // at most three digits per piece
      size_t j = i + 1;
      while (j < e && j - i < 3 && cat(j) == Cat::number) ++j;
      piece(i, j);
      i = j;
      continue;
    }
    const size_t s0 = (c == ' ' && i + 1 < e && cat(i + 1) == Cat::other) ? i + 1 : i;
    if (cat(s0) == Cat::other) {  // punctuation run plus trailing newlines
      size_t j = s0 + 1;
      while (j < e && cat(j) == Cat::other) ++j;
      while (j < e && newline(j)) ++j;
      piece(i, j);
      i = j;
      continue;
    }
    size_t r = i;
    while (r < e && cat(r) == Cat::space) ++r;
    size_t last_nl = r;
    for (size_t k = i; k < r; ++k)
      if (newline(k)) last_nl = k;
    size_t j;
    if (last_nl < r) j = last_nl + 1;                  // \s*[\r\n]+
    else j = (r == e || r - i == 1) ? r : r - 1;       // \s+(?!\S) | \s+
    piece(i, j);
    i = j;
  }
}

bool is_llama3(const std::string& pre) { return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3"; }

bool splits_digits(const std::string& pre) {
  static const char* kinds[] = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"};
  return std::find_if(std::begin(kinds), std::end(kinds), [&](const char* k) { return pre == k; }) != std::end(kinds);
}

}  // namespace

// ---- construction ---------------------------------------------------------------------------------

Tokenizer::Tokenizer(const GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama")
    f.fail("metadata 'tokenizer.ggml.model'", "'" + model + "' is not supported (allowed: gpt2 (byte-level BPE), llama (SentencePiece))");
  spm_ = model == "llama";
  tokens_ = f.get_string_array("tokenizer.ggml.tokens");
  if (tokens_.empty() || tokens_.size() > size_t(INT32_MAX))
    f.fail("metadata 'tokenizer.ggml.tokens'", std::to_string(tokens_.size()) + " tokens (allowed: 1 to 2^31-1)");
  if (f.has("tokenizer.ggml.token_type")) {
    const auto& t = f.get_number_array("tokenizer.ggml.token_type");
    if (t.size() != tokens_.size())
      f.fail("metadata 'tokenizer.ggml.token_type'", std::to_string(t.size()) + " entries but there are " +
                                                         std::to_string(tokens_.size()) + " tokens");
    for (double x : t) types_.push_back(int(x));
  }
  if (spm_) {
    const auto& sc = f.get_number_array("tokenizer.ggml.scores");
    if (sc.size() != tokens_.size())
      f.fail("metadata 'tokenizer.ggml.scores'", std::to_string(sc.size()) + " entries but there are " +
                                                     std::to_string(tokens_.size()) + " tokens");
    for (double x : sc) scores_.push_back(float(x));
    if (const GgufValue* v = f.find("tokenizer.ggml.add_space_prefix")) add_space_prefix_ = v->i != 0;
    else add_space_prefix_ = true;  // llama.cpp's default for SentencePiece vocabularies
  }
  unk_ = int32_t(f.get_int("tokenizer.ggml.unknown_token_id", -1));
  if (unk_ < -1 || unk_ >= int32_t(tokens_.size())) unk_ = -1;
  pre_ = f.get_string("tokenizer.ggml.pre", "default");
  if (!spm_ && pre_ != "default" && pre_ != "gpt2" && !splits_digits(pre_) && !is_llama3(pre_))
    f.fail("metadata 'tokenizer.ggml.pre'", "'" + pre_ +
                                                "' is not supported (allowed: default, gpt2, smollm, starcoder, refact, command-r, codeshell, exaone, minerva, llama-bpe, llama3, llama-v3)");
  if (const GgufValue* v = f.find("tokenizer.ggml.add_bos_token")) {
    if (v->type != GgufValueType::BOOL && !v->is_integer())
      f.fail("metadata 'tokenizer.ggml.add_bos_token'", "a " + gguf_value_type_name(v->type) + " is not a bool");
    add_bos_ = v->i != 0;
  }
  bos_ = int32_t(f.get_int("tokenizer.ggml.bos_token_id", -1));
  eos_ = int32_t(f.get_int("tokenizer.ggml.eos_token_id", -1));
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    const int64_t v = f.get_int(key, -1);
    if (v < -1 || v >= int64_t(tokens_.size()))
      f.fail(std::string("metadata '") + key + "'", std::to_string(v) + " is not a token id (0 to " + std::to_string(tokens_.size() - 1) + ")");
  }
  init(f.has("tokenizer.ggml.merges") ? f.get_string_array("tokenizer.ggml.merges") : std::vector<std::string>{}, f.path());
}

Tokenizer::Tokenizer(std::vector<std::string> tokens, std::vector<int> types, const std::vector<std::string>& merges,
                     const std::string& pre, int32_t bos, int32_t eos, const std::string& where)
    : tokens_(std::move(tokens)), types_(std::move(types)), pre_(pre), bos_(bos), eos_(eos) {
  if (!types_.empty() && types_.size() != tokens_.size())
    throw_input_error(where, 0, "token types", std::to_string(types_.size()) + " entries for " + std::to_string(tokens_.size()) + " tokens");
  init(merges, where);
}

Tokenizer Tokenizer::sentencepiece(std::vector<std::string> tokens, std::vector<int> types, std::vector<float> scores,
                                   int32_t bos, int32_t eos, bool add_space_prefix, const std::string& where) {
  Tokenizer t;
  if (scores.size() != tokens.size() || (!types.empty() && types.size() != tokens.size()))
    throw_input_error(where, 0, "token scores", std::to_string(scores.size()) + " scores and " + std::to_string(types.size()) +
                                                    " types for " + std::to_string(tokens.size()) + " tokens");
  t.tokens_ = std::move(tokens);
  t.types_ = std::move(types);
  t.scores_ = std::move(scores);
  t.bos_ = bos;
  t.eos_ = eos;
  t.spm_ = true;
  t.add_space_prefix_ = add_space_prefix;
  t.pre_ = "default";
  t.init({}, where);
  return t;
}

void Tokenizer::init(const std::vector<std::string>& merges, const std::string& where) {
  split_digits_ = splits_digits(pre_);
  llama3_ = is_llama3(pre_);
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], int32_t(i));  // first wins on duplicates
  merge_rank_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t sp = merges[r].find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == merges[r].size())
      throw_input_error(where, 0, "metadata 'tokenizer.ggml.merges'",
                        "entry " + std::to_string(r) + " '" + merges[r] + "' is not 'left right'");
    merge_rank_.emplace(merges[r], int32_t(r));
  }
  for (size_t i = 0; i < types_.size(); ++i)
    if ((types_[i] == 3 || types_[i] == 4) && !tokens_[i].empty()) specials_.push_back(int32_t(i));
  // Longest first, so "<|im_start|>" wins over a shorter special that is its prefix.
  std::stable_sort(specials_.begin(), specials_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[size_t(a)].size() > tokens_[size_t(b)].size(); });
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && size_t(id) < types_.size() && types_[size_t(id)] == 3;
}

int32_t Tokenizer::find(const std::string& piece) const {
  auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

// ---- encoding -------------------------------------------------------------------------------------

std::vector<std::string> Tokenizer::pre_tokenize(const std::string& text) const {
  std::vector<std::string> out;
  const std::vector<Cp> cps = code_points(text);
  if (llama3_) {
    llama3_split(text, cps, 0, cps.size(), out);
    return out;
  }
  if (!split_digits_) {
    gpt2_split(text, cps, 0, cps.size(), out);
    return out;
  }
  // Every digit is a piece of its own; the text between digits is split by the GPT-2 pattern.
  size_t b = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (category(cps[i].cp) != Cat::number) continue;
    gpt2_split(text, cps, b, i, out);
    out.push_back(text.substr(cps[i].pos, cps[i].len));
    b = i + 1;
  }
  gpt2_split(text, cps, b, cps.size(), out);
  return out;
}

void Tokenizer::bpe(const std::string& word, std::vector<int32_t>& out) const {
  const ByteMap& bm = byte_map();
  std::vector<std::string> sym;
  for (unsigned char ch : word) sym.push_back(bm.to_char[ch]);
  std::string key;
  while (sym.size() > 1) {
    int32_t best = INT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      key.assign(sym[i]).append(" ").append(sym[i + 1]);
      auto it = merge_rank_.find(key);
      if (it != merge_rank_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == INT32_MAX) break;
    // Merge every occurrence of the best pair, left to right.
    const std::string left = sym[at], right = sym[at + 1];
    std::vector<std::string> next;
    next.reserve(sym.size());
    for (size_t i = 0; i < sym.size(); ++i) {
      if (i + 1 < sym.size() && sym[i] == left && sym[i + 1] == right) {
        next.push_back(left + right);
        ++i;
      } else {
        next.push_back(std::move(sym[i]));
      }
    }
    sym = std::move(next);
  }
  for (const std::string& s : sym) {
    if (const int32_t id = find(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    // A symbol the vocabulary lacks (an incomplete merge table): fall back to its single characters.
    for (const Cp& c : code_points(s)) {
      const int32_t id = find(s.substr(c.pos, c.len));
      if (id >= 0) out.push_back(id);
    }
  }
}

void Tokenizer::encode_plain(const std::string& text, std::vector<int32_t>& out) const {
  if (spm_) {
    spm(text, out);
    return;
  }
  for (const std::string& w : pre_tokenize(text)) bpe(w, out);
}

namespace {
const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
}

void Tokenizer::spm(const std::string& raw, std::vector<int32_t>& out) const {
  std::string text;
  for (char ch : raw) {
    if (ch == ' ') text += kSpmSpace;
    else text.push_back(ch);
  }
  if (text.empty()) return;
  // Symbols are the text's characters in a linked list; the adjacent pair whose concatenation is the
  // highest-scoring vocabulary entry (leftmost on ties) is merged until no pair is in the vocabulary.
  struct Sym { int prev, next; size_t start, len; };
  std::vector<Sym> sym;
  for (const Cp& c : code_points(text)) sym.push_back({int(sym.size()) - 1, int(sym.size()) + 1, c.pos, c.len});
  sym.back().next = -1;
  struct Pair {
    float score;
    int left, right;
    size_t len;
    bool operator<(const Pair& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Pair> queue;
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const int32_t id = find(text.substr(sym[size_t(l)].start, sym[size_t(l)].len + sym[size_t(r)].len));
    if (id >= 0) queue.push({scores_[size_t(id)], l, r, sym[size_t(l)].len + sym[size_t(r)].len});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_pair(int(i) - 1, int(i));
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Sym& l = sym[size_t(p.left)];
    Sym& r = sym[size_t(p.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;  // stale: a side merged since
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }
  for (int i = 0; i >= 0; i = sym[size_t(i)].next) {
    const std::string piece = text.substr(sym[size_t(i)].start, sym[size_t(i)].len);
    if (const int32_t id = find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Byte fallback: a character the vocabulary lacks is spelled byte by byte.
    for (unsigned char b : piece) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const int32_t id = find(name);
      if (id >= 0) out.push_back(id);
      else if (unk_ >= 0) out.push_back(unk_);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool parse_special) const {
  std::vector<int32_t> out;
  // SentencePiece vocabularies put a space before the text and after each special token (llama.cpp
  // does the same), so "Hello" is "▁Hello" as in training.
  auto spm_prefix = [&](size_t) { return spm_ && add_space_prefix_ ? std::string(" ") : std::string(); };
  if (!parse_special || specials_.empty()) {
    encode_plain(spm_prefix(0) + text, out);
    return out;
  }
  size_t start = 0, i = 0;
  while (i < text.size()) {
    int32_t hit = -1;
    for (int32_t id : specials_) {
      const std::string& t = tokens_[size_t(id)];
      if (text.compare(i, t.size(), t) == 0) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    encode_plain(spm_prefix(start) + text.substr(start, i - start), out);
    out.push_back(hit);
    i += tokens_[size_t(hit)].size();
    start = i;
  }
  encode_plain(spm_prefix(start) + text.substr(start), out);
  return out;
}

// ---- decoding -------------------------------------------------------------------------------------

std::string Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  const std::string& p = tokens_[size_t(id)];
  if (!types_.empty() && (types_[size_t(id)] == 3 || types_[size_t(id)] == 4)) return p;
  if (spm_) {
    unsigned b = 0;
    if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X>", &b) == 1) return std::string(1, char(b));
    std::string out;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, 3, kSpmSpace) == 0) {
        out.push_back(' ');
        i += 3;
      } else {
        out.push_back(p[i++]);
      }
    }
    return out;
  }
  const ByteMap& bm = byte_map();
  std::string out;
  for (const Cp& c : code_points(p)) {
    auto it = bm.to_byte.find(c.cp);
    if (it != bm.to_byte.end()) out.push_back(char(it->second));
    else out.append(p, c.pos, c.len);  // not a mapped byte: keep the character
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool specials) const {
  std::string out;
  bool at_start = true;  // SentencePiece: drop the space encode() put before the text / after a special
  for (int32_t id : ids) {
    const bool special = !types_.empty() && id >= 0 && id < vocab_size() && (types_[size_t(id)] == 3 || types_[size_t(id)] == 4);
    if (!(specials || !is_control(id))) {
      at_start = true;
      continue;
    }
    std::string t = token_text(id);
    if (spm_ && add_space_prefix_ && at_start && !special && !t.empty() && t[0] == ' ') t.erase(0, 1);
    at_start = special;
    out += t;
  }
  return out;
}

}  // namespace kvsim::llm
