#include "io/tokenizer.h"

#include <set>

#include "core/error.h"

namespace dt::io {

ByteTokenizer::ByteTokenizer(std::vector<std::string> specials) : specials_(std::move(specials)) {
  std::set<std::string> seen;
  for (const std::string& s : specials_) {
    DT_CHECK(!s.empty(), "ByteTokenizer: a special token has an empty name");
    DT_CHECK(seen.insert(s).second, "ByteTokenizer: special token \"" + s + "\" appears twice");
  }
}

bool ByteTokenizer::has_special(const std::string& name) const {
  for (const std::string& s : specials_)
    if (s == name) return true;
  return false;
}

int32_t ByteTokenizer::special(const std::string& name) const {
  std::string known;
  for (size_t i = 0; i < specials_.size(); ++i) {
    if (specials_[i] == name) return 256 + static_cast<int32_t>(i);
    known += (i ? ", " : "") + specials_[i];
  }
  fail(DT_ERR_NOT_FOUND, "ByteTokenizer: no special token \"" + name + "\"; known: " + (known.empty() ? "none" : known));
}

std::vector<int32_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids, bool skip_specials) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    DT_CHECK(id >= 0 && id < vocab_size(), "ByteTokenizer::decode: ids[" + std::to_string(i) + "] is " +
                                               std::to_string(id) + "; accepted: [0, " +
                                               std::to_string(vocab_size()) + ")");
    if (id < 256)
      out.push_back(static_cast<char>(id));
    else if (!skip_specials)
      out += "<|" + specials_[static_cast<size_t>(id - 256)] + "|>";
  }
  return out;
}

}  // namespace dt::io
