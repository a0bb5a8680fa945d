// The HTTP/1.1 server of `dtrain serve`: one thread runs an epoll loop over every
// connection, so a slow or idle client costs a little memory and never a thread (slow
// clients cannot starve the others, and shutdown cannot wait on one). Each limit of
// http::Limits is enforced here: connections over the cap get 503 and are closed, a head
// or body that does not arrive in time gets 408, a client that stops reading is dropped
// after write_timeout_ms, a reset is noticed at once (the request's on_gone runs).
// Pipelined requests are answered in order, one at a time; a client that half-closes after
// sending still gets its answer; HTTP/1.0 gets no chunked encoding and a closed connection.
//
// Why not cpp-httplib, libevent's evhttp or libmicrohttpd: docs/dependencies.md.
//
// Thread safety: the handler runs on the loop thread and must not block (hand long work to
// another thread). Every Exchange method may be called from any thread, also after the
// server stopped (then it does nothing).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http_request.h"

namespace dtcli::http {

using Headers = std::vector<std::pair<std::string, std::string>>;
struct Shared;  // the state the loop and the exchanges share (http_server.cc)

// One request and its response: answered once, whole (respond) or streamed (start_stream,
// send..., end_stream).
class Exchange {
 public:
  Exchange(std::shared_ptr<Shared> shared, uint64_t conn, uint64_t id, Request request);
  const Request& request() const { return request_; }
  void respond(int status, const std::string& content_type, const std::string& body, const Headers& extra = {});
  void start_stream(const std::string& content_type, const Headers& extra = {});
  void send(const std::string& piece);
  void end_stream();
  // The client went away (reset, closed before the answer, a write failed or timed out).
  bool gone() const;
  // Runs f once when the client goes (on the loop thread), or now if it has gone.
  void on_gone(std::function<void()> f);

 private:
  // Appends bytes to the connection's output; `last`: the response is complete.
  void write(std::string bytes, bool last);
  std::shared_ptr<Shared> shared_;
  const uint64_t conn_, id_;
  const Request request_;
  bool streaming_ = false;
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

// What the server counted (GET /metrics).
struct Counters {
  int64_t connections_open = 0, connections_total = 0, connections_refused = 0;  // refused: over max_connections
  int64_t requests = 0, too_large = 0, header_too_large = 0, timeouts = 0, bad_requests = 0;  // 413, 431, 408, other 4xx/5xx of the parser
  int64_t dropped_slow_readers = 0, resets = 0;
  int64_t busy = 0;  // requests the application refused for load (count_busy)
};

class Server {
 public:
  Server(const Limits& limits, Handler handler);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Listens on host:port (0: any free port); returns the port. Throws std::runtime_error.
  int listen(const std::string& host, int port);
  // The body of the answers the server gives itself (400, 408, 413, 431, 503 ...): the
  // status and a message in; default: the message as it is.
  void set_error_body(std::function<std::string(int, const std::string&)> f);
  void start();  // the loop thread
  // Drain: no new connections; idle keep-alive connections close, responses say
  // "Connection: close".
  void stop_accepting();
  // Connections with a request whose answer is not yet fully written.
  int busy_connections() const;
  // Closes every connection now (busy ones' on_gone run), then ends the loop thread.
  void stop();
  Counters counters() const;
  void count_busy();  // the application answered 503 for load

 private:
  void loop();
  std::shared_ptr<Shared> shared_;
  Limits limits_;
  Handler handler_;
  std::thread thread_;
};

// "HTTP/1.1 200 OK"'s reason phrase.
const char* reason_phrase(int status);

}  // namespace dtcli::http
