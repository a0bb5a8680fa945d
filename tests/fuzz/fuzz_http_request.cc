// libFuzzer: dtrain serve's HTTP request parser (tools/dtrain/http_request.cc) on bytes as a
// client sends them, split at points the input chooses (a request arrives in any pieces).
// Whatever it is fed, the parser must stay within its limits: a body it accepts is never
// larger than max_body_bytes, a head it accepts never larger than max_header_bytes, and an
// error always carries a status and a message.
#include <cstdint>
#include <string>

#include "../../tools/dtrain/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  if (n < 1) return 0;
  dtcli::http::Limits limits;
  limits.max_header_bytes = 512;
  limits.max_headers = 8;
  limits.max_body_bytes = 1024;
  dtcli::http::RequestParser parser(limits);
  const size_t step = 1 + data[0] % 16;  // the size of each arriving piece
  std::string in;
  size_t pos = 0;
  for (size_t at = 1; at < n; at += step) {
    in.append(reinterpret_cast<const char*>(data) + at, std::min(step, n - at));
    for (;;) {
      const auto st = parser.feed(in, &pos);
      if (st == dtcli::http::RequestParser::State::Error) {
        if (parser.status() < 400 || parser.message().empty()) __builtin_trap();
        return 0;
      }
      if (st != dtcli::http::RequestParser::State::Done) break;
      const dtcli::http::Request r = parser.take();
      if (r.body.size() > limits.max_body_bytes || r.target.empty() || r.target[0] != '/') __builtin_trap();
    }
    if (pos > in.size()) __builtin_trap();
  }
  return 0;
}
