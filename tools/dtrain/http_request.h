// HTTP/1.x requests as `dtrain serve` reads them off a socket: parsed incrementally from a
// connection's input buffer, with every resource a client controls bounded before it is
// spent (the head's size and header count, the body's size, announced or chunked). A
// request the server will not take ends with the status to answer (400, 413, 415, 431,
// 501, 505) and a message; the connection is then closed.
//
// Deliberately narrow: origin-form targets, Content-Length or chunked bodies (not both:
// that is how requests are smuggled past proxies), no request compression (a small gzip
// body can inflate without bound, so Content-Encoding other than identity is 415).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtcli::http {

// Every bound and deadline of the server, with its default (docs/serving.md lists them).
struct Limits {
  size_t max_header_bytes = 16 << 10;  // request line and headers together (431 above)
  int max_headers = 64;                // header lines (431 above)
  size_t max_body_bytes = 1 << 20;     // announced or received (413 above)
  int header_timeout_ms = 10000;       // a request's first byte to the end of its headers (408)
  int body_timeout_ms = 30000;         // the end of the headers to the end of the body (408)
  int idle_timeout_ms = 15000;         // keep-alive: a connection's wait for its next request
  int write_timeout_ms = 30000;        // a response not taken by its client (no progress)
  size_t max_output_bytes = 4 << 20;   // written but not yet taken by a slow reader
  int max_requests_per_connection = 1000;
  int max_connections = 1024;          // open at once; more are answered 503 and closed
};

struct Request {
  std::string method, target, path;  // path: the target without its query
  int minor_version = 1;             // HTTP/1.0 or HTTP/1.1
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 never
  // The value of a header (name lower-cased), or null.
  const std::string* header(const std::string& name) const;
};

class RequestParser {
 public:
  enum class State { Idle, Head, Body, Done, Error };
  explicit RequestParser(const Limits& limits) : limits_(&limits) {}

  // Consumes what it can of in[*pos, in.size()), advancing *pos. Returns the state after:
  // Done (take() the request), Error (status()/message()), else it needs more bytes.
  State feed(const std::string& in, size_t* pos);
  State state() const { return state_; }
  bool expects_continue() const { return expect_continue_; }  // "Expect: 100-continue"
  int status() const { return status_; }
  const std::string& message() const { return message_; }
  Request take();  // the parsed request; the parser is Idle again

 private:
  State fail(int status, std::string message);
  State parse_head(const std::string& head);
  State read_body(const std::string& in, size_t* pos);
  State read_chunked(const std::string& in, size_t* pos);

  const Limits* limits_;
  State state_ = State::Idle;
  Request req_;
  bool chunked_ = false, expect_continue_ = false;
  uint64_t content_length_ = 0;
  // Chunked decoding: the bytes left in the current chunk, and whether the trailer is next.
  uint64_t chunk_left_ = 0;
  bool in_chunk_ = false, trailer_ = false;
  size_t trailer_bytes_ = 0;
  int status_ = 0;
  std::string message_;
};

}  // namespace dtcli::http
