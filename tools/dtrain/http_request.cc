#include "http_request.h"

#include <algorithm>
#include <cctype>

namespace dtcli::http {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// RFC 9110's token characters (method and header names).
bool token(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || std::string("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string::npos))
      return false;
  return true;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return s.substr(a, b - a);
}

// A comma-separated header value holds `want` as one of its elements.
bool has_element(const std::string& value, const std::string& want) {
  size_t from = 0;
  while (from <= value.size()) {
    const size_t comma = std::min(value.find(',', from), value.size());
    if (lower(trim(value.substr(from, comma - from))) == want) return true;
    from = comma + 1;
  }
  return false;
}

}  // namespace

const std::string* Request::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return &v;
  return nullptr;
}

RequestParser::State RequestParser::fail(int status, std::string message) {
  status_ = status;
  message_ = std::move(message);
  return state_ = State::Error;
}

Request RequestParser::take() {
  Request r = std::move(req_);
  *this = RequestParser(*limits_);
  return r;
}

RequestParser::State RequestParser::feed(const std::string& in, size_t* pos) {
  if (state_ == State::Idle) {
    // Empty lines before a request line are allowed (RFC 9112 2.2); a client's keep-alive
    // CRLF after a body is one.
    while (*pos < in.size() && (in[*pos] == '\r' || in[*pos] == '\n')) ++*pos;
    if (*pos == in.size()) return state_;
    state_ = State::Head;
  }
  if (state_ == State::Head) {
    const size_t end = in.find("\r\n\r\n", *pos);
    const size_t have = (end == std::string::npos ? in.size() : end + 4) - *pos;
    if (have > limits_->max_header_bytes)
      return fail(431, "the request line and headers exceed " + std::to_string(limits_->max_header_bytes) +
                           " bytes (dtrain serve --max-header-bytes)");
    if (end == std::string::npos) return state_;
    const std::string head = in.substr(*pos, end + 2 - *pos);
    *pos = end + 4;
    if (parse_head(head) == State::Error) return state_;
    state_ = State::Body;
  }
  if (state_ == State::Body) return chunked_ ? read_chunked(in, pos) : read_body(in, pos);
  return state_;
}

RequestParser::State RequestParser::parse_head(const std::string& head) {
  std::vector<std::string> lines;
  for (size_t from = 0; from < head.size();) {
    const size_t eol = head.find("\r\n", from);
    lines.push_back(head.substr(from, eol - from));
    from = eol + 2;
  }
  for (const std::string& l : lines)
    for (unsigned char c : l)
      if (c == '\0' || c == '\r' || c == '\n') return fail(400, "a bare CR, LF or NUL in the request head");
  // The request line: METHOD SP target SP HTTP/1.x
  const std::string& rl = lines[0];
  const size_t s1 = rl.find(' '), s2 = rl.rfind(' ');
  if (s1 == std::string::npos || s2 == s1) return fail(400, "a malformed request line (METHOD /path HTTP/1.1)");
  req_.method = rl.substr(0, s1);
  req_.target = rl.substr(s1 + 1, s2 - s1 - 1);
  const std::string version = rl.substr(s2 + 1);
  if (!token(req_.method)) return fail(400, "a malformed method in the request line");
  if (req_.target.empty() || req_.target[0] != '/' || req_.target.find(' ') != std::string::npos)
    return fail(400, "the request target must be a path starting with '/'");
  if (version == "HTTP/1.1") req_.minor_version = 1;
  else if (version == "HTTP/1.0") req_.minor_version = 0;
  else if (version.rfind("HTTP/", 0) == 0) return fail(505, "HTTP version " + version.substr(5) + "; accepted: 1.0, 1.1");
  else return fail(400, "a malformed request line (METHOD /path HTTP/1.1)");
  req_.path = req_.target.substr(0, req_.target.find('?'));
  if (static_cast<int>(lines.size()) - 1 > limits_->max_headers)
    return fail(431, std::to_string(lines.size() - 1) + " header lines; the limit is " +
                         std::to_string(limits_->max_headers) + " (dtrain serve --max-headers)");
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l[0] == ' ' || l[0] == '\t') return fail(400, "folded header lines are not accepted");
    const size_t colon = l.find(':');
    if (colon == std::string::npos || !token(l.substr(0, colon)))
      return fail(400, "a malformed header line (Name: value)");
    req_.headers.emplace_back(lower(l.substr(0, colon)), trim(l.substr(colon + 1)));
  }
  req_.keep_alive = req_.minor_version == 1;
  int lengths = 0;
  for (const auto& [k, v] : req_.headers) {
    if (k == "connection" && has_element(v, "close")) req_.keep_alive = false;
    if (k == "content-length") {
      ++lengths;
      if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return fail(400, "Content-Length must be a decimal number");
      content_length_ = std::stoull(v);
    }
    if (k == "transfer-encoding") {
      if (lower(v) != "chunked") return fail(501, "Transfer-Encoding \"" + v + "\"; accepted: chunked");
      if (chunked_) return fail(400, "Transfer-Encoding given twice");
      chunked_ = true;
    }
    if (k == "content-encoding" && lower(v) != "identity")
      return fail(415, "Content-Encoding \"" + v + "\": compressed request bodies are not accepted; send identity");
    if (k == "expect") {
      if (lower(v) != "100-continue") return fail(417, "Expect \"" + v + "\"; accepted: 100-continue");
      expect_continue_ = req_.minor_version == 1;
    }
  }
  if (chunked_ && lengths > 0) return fail(400, "both Content-Length and Transfer-Encoding: chunked");
  if (chunked_ && req_.minor_version == 0) return fail(400, "Transfer-Encoding: chunked in an HTTP/1.0 request");
  if (lengths > 1) return fail(400, "Content-Length given more than once");
  if (content_length_ > limits_->max_body_bytes)
    return fail(413, "the request body is " + std::to_string(content_length_) + " bytes; the limit is " +
                         std::to_string(limits_->max_body_bytes) + " (dtrain serve --max-body-bytes)");
  return state_;
}

RequestParser::State RequestParser::read_body(const std::string& in, size_t* pos) {
  const size_t take = std::min<uint64_t>(content_length_ - req_.body.size(), in.size() - *pos);
  req_.body.append(in, *pos, take);
  *pos += take;
  if (req_.body.size() == content_length_) state_ = State::Done;
  return state_;
}

RequestParser::State RequestParser::read_chunked(const std::string& in, size_t* pos) {
  while (*pos < in.size()) {
    if (in_chunk_) {
      if (chunk_left_ > 0) {
        const size_t take = std::min<uint64_t>(chunk_left_, in.size() - *pos);
        req_.body.append(in, *pos, take);
        *pos += take;
        chunk_left_ -= take;
        continue;
      }
      if (in.size() - *pos < 2) return state_;
      if (in.compare(*pos, 2, "\r\n") != 0) return fail(400, "a chunk of the body does not end with CRLF");
      *pos += 2;
      in_chunk_ = false;
      continue;
    }
    const size_t eol = in.find("\r\n", *pos);
    if (eol == std::string::npos) {
      if (in.size() - *pos > 1024) return fail(400, "a chunk-size line longer than 1024 bytes");
      return state_;
    }
    const std::string line = in.substr(*pos, eol - *pos);
    *pos = eol + 2;
    if (trailer_) {  // trailer fields, ignored, up to the empty line
      trailer_bytes_ += line.size() + 2;
      if (trailer_bytes_ > limits_->max_header_bytes) return fail(431, "the chunked body's trailer is too large");
      if (line.empty()) return state_ = State::Done;
      continue;
    }
    const std::string hex = trim(line.substr(0, line.find(';')));
    if (hex.empty() || hex.size() > 15 || !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
      return fail(400, "a malformed chunk size");
    const uint64_t size = std::stoull(hex, nullptr, 16);
    if (size == 0) {
      trailer_ = true;
      continue;
    }
    if (req_.body.size() + size > limits_->max_body_bytes)
      return fail(413, "the chunked request body exceeds " + std::to_string(limits_->max_body_bytes) +
                           " bytes (dtrain serve --max-body-bytes)");
    chunk_left_ = size;
    in_chunk_ = true;
  }
  return state_;
}

}  // namespace dtcli::http
