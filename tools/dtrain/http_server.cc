#include "http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

namespace dtcli::http {

using Clock = std::chrono::steady_clock;
namespace {
constexpr uint64_t kListen = 0, kWake = 1;  // epoll keys; connections count from 2
constexpr auto kLinger = std::chrono::seconds(2);  // after our last byte, for the client's FIN

int64_t ms_since(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - t).count();
}
}  // namespace

const char* reason_phrase(int s) {
  switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

struct Conn {
  uint64_t id = 0;
  int fd = -1;
  explicit Conn(const Limits& l) : parser(l) {}
  std::string in, out;  // unparsed input from `pos`; output not yet sent from `sent`
  size_t pos = 0, sent = 0;
  RequestParser parser;
  enum class Phase { Reading, Busy, Closing } phase = Phase::Reading;
  Clock::time_point idle_since, request_start, head_done, write_progress, closing_since;
  bool read_closed = false, paused = false, close_after = false, continue_sent = false;
  bool response_done = false, keep_alive = true, slow = false;
  uint64_t exchange = 0;  // the request in progress (0: none)
  int requests = 0, minor_version = 1;
  uint32_t events = 0;  // the epoll mask now
  std::vector<std::function<void()>> on_gone;
};

struct Shared {
  Limits limits;
  mutable std::mutex mu;
  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  std::set<uint64_t> dirty;  // connections with output queued by an exchange
  int epfd = -1, wakefd = -1, listenfd = -1;
  bool stopping = false, stopped = false, draining = false, accept_paused = false;
  Clock::time_point accept_resume;
  uint64_t next_id = 2;
  Counters counters;
  std::function<std::string(int, const std::string&)> error_body;

  void wake() {
    const uint64_t one = 1;
    if (wakefd >= 0) (void)!::write(wakefd, &one, sizeof one);
  }
  // The response head; decides whether the connection closes after this response.
  std::string head(Conn& c, int status, const Headers& hs, const std::string& framing) {
    const bool close = !c.keep_alive || c.read_closed || draining ||
                       c.requests >= limits.max_requests_per_connection || c.close_after;
    c.close_after = close;
    std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    for (const auto& [k, v] : hs) h += k + ": " + v + "\r\n";
    h += framing + (close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n");
    return h;
  }
  void queue(Conn& c, const std::string& bytes) {
    if (c.out.size() == c.sent) c.write_progress = Clock::now();
    c.out += bytes;
    if (c.out.size() - c.sent > limits.max_output_bytes) c.slow = true;  // dropped by the sweep
    dirty.insert(c.id);
  }
};

// ---- Exchange: any thread, under the shared lock; a stale exchange writes nothing.
Exchange::Exchange(std::shared_ptr<Shared> shared, uint64_t conn, uint64_t id, Request request)
    : shared_(std::move(shared)), conn_(conn), id_(id), request_(std::move(request)) {}

void Exchange::write(std::string bytes, bool last) {
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    auto it = shared_->conns.find(conn_);
    if (shared_->stopped || it == shared_->conns.end() || it->second->exchange != id_ || it->second->response_done) return;
    Conn& c = *it->second;
    shared_->queue(c, bytes);
    c.response_done = last;
  }
  shared_->wake();
}

void Exchange::respond(int status, const std::string& type, const std::string& body, const Headers& extra) {
  std::string bytes;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    auto it = shared_->conns.find(conn_);
    if (it == shared_->conns.end() || it->second->exchange != id_) return;
    Headers hs = extra;
    hs.emplace_back("Content-Type", type);
    bytes = shared_->head(*it->second, status, hs, "Content-Length: " + std::to_string(body.size()) + "\r\n");
  }
  write(bytes + (request_.method == "HEAD" ? "" : body), true);
}

void Exchange::start_stream(const std::string& type, const Headers& extra) {
  std::string bytes;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    auto it = shared_->conns.find(conn_);
    if (it == shared_->conns.end() || it->second->exchange != id_) return;
    Conn& c = *it->second;
    Headers hs = extra;
    hs.emplace_back("Content-Type", type);
    // HTTP/1.0 has no chunked encoding: the body ends where the connection does.
    if (request_.minor_version == 0) c.close_after = true;
    bytes = shared_->head(c, 200, hs, request_.minor_version == 0 ? "" : "Transfer-Encoding: chunked\r\n");
  }
  streaming_ = true;
  write(bytes, false);
}

void Exchange::send(const std::string& piece) {
  if (piece.empty()) return;
  if (request_.minor_version == 0) return write(piece, false);
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
  write(size + piece + "\r\n", false);
}

void Exchange::end_stream() { write(request_.minor_version == 0 ? "" : "0\r\n\r\n", true); }

bool Exchange::gone() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  auto it = shared_->conns.find(conn_);
  return shared_->stopped || it == shared_->conns.end() || it->second->exchange != id_;
}

void Exchange::on_gone(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    auto it = shared_->conns.find(conn_);
    const bool alive = !shared_->stopped && it != shared_->conns.end() && it->second->exchange == id_;
    if (alive) return it->second->on_gone.push_back(std::move(f));
  }
  f();
}

// ---- The loop: everything below runs on the loop thread with shared->mu held.
namespace {

struct Loop {
  Shared& s;
  std::vector<std::shared_ptr<Exchange>>& ready;
  std::vector<std::function<void()>>& gone;
  std::shared_ptr<Shared> self;
  Clock::time_point now = Clock::now();

  void set_events(Conn& c) {
    uint32_t e = 0;
    if (!c.read_closed && !c.paused) e |= EPOLLIN | EPOLLRDHUP;
    if (c.sent < c.out.size()) e |= EPOLLOUT;
    if (e == c.events) return;
    epoll_event ev{};
    ev.events = e;
    ev.data.u64 = c.id;
    epoll_ctl(s.epfd, EPOLL_CTL_MOD, c.fd, &ev);
    c.events = e;
  }

  void close_conn(Conn& c) {
    epoll_ctl(s.epfd, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    if (c.exchange != 0)  // the answer was not fully delivered: the request's owner hears of it
      for (auto& f : c.on_gone) gone.push_back(std::move(f));
    --s.counters.connections_open;
    s.dirty.erase(c.id);
    s.conns.erase(c.id);  // c is gone now
  }

  void begin_close(Conn& c) {
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Conn::Phase::Closing;
    c.closing_since = now;
    c.exchange = 0;
    c.paused = false;
  }

  // A request the parser refused, or a timeout: answered, then the connection closes.
  void refuse(Conn& c, int status, const std::string& message) {
    if (status == 413) ++s.counters.too_large;
    else if (status == 431) ++s.counters.header_too_large;
    else if (status == 408) ++s.counters.timeouts;
    else ++s.counters.bad_requests;
    c.phase = Conn::Phase::Busy;
    c.exchange = 1;  // no Exchange: only the loop writes this answer
    c.close_after = true;
    const std::string body = s.error_body(status, message);
    s.queue(c, s.head(c, status, {{"Content-Type", "application/json"}},
                      "Content-Length: " + std::to_string(body.size()) + "\r\n") + body);
    c.response_done = true;
  }

  void parse(Conn& c) {
    while (c.phase == Conn::Phase::Reading) {
      const auto before = c.parser.state();
      const auto st = c.parser.feed(c.in, &c.pos);
      using S = RequestParser::State;
      if (before == S::Idle && st != S::Idle) c.request_start = now;
      if ((before == S::Idle || before == S::Head) && (st == S::Body || st == S::Done)) c.head_done = now;
      if (st == S::Error) return refuse(c, c.parser.status(), c.parser.message());
      if (st == S::Body && c.parser.expects_continue() && !c.continue_sent) {
        s.queue(c, "HTTP/1.1 100 Continue\r\n\r\n");
        c.continue_sent = true;
      }
      if (st != S::Done) break;
      Request r = c.parser.take();
      c.phase = Conn::Phase::Busy;
      c.exchange = s.next_id++;
      c.keep_alive = r.keep_alive;
      c.minor_version = r.minor_version;
      c.continue_sent = false;
      ++c.requests;
      ++s.counters.requests;
      ready.push_back(std::make_shared<Exchange>(self, c.id, c.exchange, std::move(r)));
    }
    if (c.pos > 0 && (c.pos == c.in.size() || c.pos > (64 << 10))) {
      c.in.erase(0, c.pos);
      c.pos = 0;
    }
  }

  // Returns false when the connection was closed.
  bool read(Conn& c) {
    char buf[64 << 10];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (c.phase == Conn::Phase::Closing) continue;  // discarded
        c.in.append(buf, static_cast<size_t>(n));
        if (c.phase == Conn::Phase::Reading) parse(c);
        // A pipelining client waits while its earlier request runs; what it sent meanwhile
        // is held up to one request's worth, then reading pauses.
        if (c.phase != Conn::Phase::Reading &&
            c.in.size() - c.pos > s.limits.max_header_bytes + s.limits.max_body_bytes) {
          c.paused = true;
          break;
        }
        continue;
      }
      if (n == 0) {  // the client's FIN: while its request runs it may still read (a half-close)
        c.read_closed = true;
        if (c.phase != Conn::Phase::Busy) {  // idle, a request cut short, or our own close
          close_conn(c);
          return false;
        }
        break;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      if (c.exchange != 0) ++s.counters.resets;
      close_conn(c);
      return false;
    }
    set_events(c);
    return true;
  }

  bool flush(Conn& c) {
    const uint64_t id = c.id;  // finish() may close c
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        c.write_progress = now;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      if (c.exchange != 0) ++s.counters.resets;
      close_conn(c);
      return false;
    }
    if (c.sent == c.out.size()) {
      c.out.clear();
      c.sent = 0;
      if (c.phase == Conn::Phase::Busy && c.response_done) finish(c);
    }
    if (!s.conns.count(id)) return false;
    set_events(c);
    return true;
  }

  // The response is fully sent: the next request, or the end of the connection.
  void finish(Conn& c) {
    c.exchange = 0;
    c.response_done = false;
    c.on_gone.clear();
    const bool more = c.pos < c.in.size();
    if (c.close_after || (c.read_closed && !more)) return begin_close(c);
    c.phase = Conn::Phase::Reading;
    c.idle_since = now;
    c.paused = false;
    parse(c);  // a pipelined request already here
    if (c.phase == Conn::Phase::Reading && c.read_closed) close_conn(c);  // cut short: none can come
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(s.listenfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: stop accepting for a moment instead of spinning.
          epoll_event ev{};
          ev.data.u64 = kListen;
          epoll_ctl(s.epfd, EPOLL_CTL_MOD, s.listenfd, &ev);
          s.accept_paused = true;
          s.accept_resume = now + std::chrono::milliseconds(100);
        }
        return;
      }
      ++s.counters.connections_total;
      if (static_cast<int>(s.conns.size()) >= s.limits.max_connections) {
        ++s.counters.connections_refused;
        const std::string body = s.error_body(503, "too many connections (dtrain serve --max-connections " +
                                                       std::to_string(s.limits.max_connections) + ")");
        const std::string msg = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
        (void)!::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
        ::close(fd);
        continue;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // streamed tokens go out at once
      auto c = std::make_unique<Conn>(s.limits);
      c->id = s.next_id++;
      c->fd = fd;
      c->idle_since = now;
      c->events = EPOLLIN | EPOLLRDHUP;
      epoll_event ev{};
      ev.events = c->events;
      ev.data.u64 = c->id;
      epoll_ctl(s.epfd, EPOLL_CTL_ADD, fd, &ev);
      ++s.counters.connections_open;
      s.conns[c->id] = std::move(c);
    }
  }

  void sweep() {
    const Limits& l = s.limits;
    std::vector<uint64_t> ids;
    for (const auto& kv : s.conns) ids.push_back(kv.first);
    for (uint64_t id : ids) {
      Conn& c = *s.conns.at(id);
      using S = RequestParser::State;
      if (c.slow || (c.sent < c.out.size() && ms_since(c.write_progress, now) > l.write_timeout_ms)) {
        ++s.counters.dropped_slow_readers;
        close_conn(c);
      } else if (c.phase == Conn::Phase::Closing) {
        if (now - c.closing_since > kLinger) close_conn(c);
      } else if (c.phase == Conn::Phase::Reading) {
        const S st = c.parser.state();
        if (st == S::Idle && (s.draining || ms_since(c.idle_since, now) > l.idle_timeout_ms)) close_conn(c);
        else if (st == S::Head && ms_since(c.request_start, now) > l.header_timeout_ms)
          refuse(c, 408, "the request's headers did not arrive within " + std::to_string(l.header_timeout_ms) + " ms");
        else if (st == S::Body && ms_since(c.head_done, now) > l.body_timeout_ms)
          refuse(c, 408, "the request's body did not arrive within " + std::to_string(l.body_timeout_ms) + " ms");
      }
    }
    if (s.accept_paused && now >= s.accept_resume && !s.draining && s.listenfd >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListen;
      epoll_ctl(s.epfd, EPOLL_CTL_MOD, s.listenfd, &ev);
      s.accept_paused = false;
    }
  }
};

}  // namespace

Server::Server(const Limits& limits, Handler handler) : shared_(std::make_shared<Shared>()), limits_(limits), handler_(std::move(handler)) {
  shared_->limits = limits;
  shared_->error_body = [](int, const std::string& m) { return m; };
}

Server::~Server() {
  stop();
  if (shared_->listenfd >= 0) ::close(shared_->listenfd);
  if (shared_->epfd >= 0) ::close(shared_->epfd);
}

int Server::listen(const std::string& host, int port) {
  // Connections up to the cap each hold a descriptor: ask for the hard limit.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    throw std::runtime_error("cannot resolve the address " + host);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ok = fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, 1024) == 0;
  freeaddrinfo(res);
  if (!ok) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + why);
  }
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  shared_->listenfd = fd;
  return ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

void Server::set_error_body(std::function<std::string(int, const std::string&)> f) { shared_->error_body = std::move(f); }

void Server::start() {
  Shared& s = *shared_;
  s.epfd = epoll_create1(EPOLL_CLOEXEC);
  s.wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.epfd < 0 || s.wakefd < 0) throw std::runtime_error(std::string("epoll: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListen;
  epoll_ctl(s.epfd, EPOLL_CTL_ADD, s.listenfd, &ev);
  ev.data.u64 = kWake;
  epoll_ctl(s.epfd, EPOLL_CTL_ADD, s.wakefd, &ev);
  thread_ = std::thread([this] { loop(); });
}

void Server::loop() {
  Shared& s = *shared_;
  epoll_event evs[256];
  for (;;) {
    const int n = epoll_wait(s.epfd, evs, 256, 100);
    std::vector<std::shared_ptr<Exchange>> ready;
    std::vector<std::function<void()>> gone;
    bool stop;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      Loop L{s, ready, gone, shared_};
      stop = s.stopping;
      for (int i = 0; i < n && !stop; ++i) {
        const uint64_t key = evs[i].data.u64;
        if (key == kListen) {
          if (!s.draining) L.accept_all();
          continue;
        }
        if (key == kWake) {
          uint64_t v;
          (void)!::read(s.wakefd, &v, sizeof v);
          continue;
        }
        auto it = s.conns.find(key);
        if (it == s.conns.end()) continue;
        Conn& c = *it->second;
        const uint32_t e = evs[i].events;
        if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && !L.read(c)) continue;
        if (e & (EPOLLERR | EPOLLHUP)) {  // a reset, or both directions closed
          if (c.exchange != 0) ++s.counters.resets;
          L.close_conn(c);
          continue;
        }
        if (e & EPOLLOUT) L.flush(c);
      }
      if (stop) {
        while (!s.conns.empty()) L.close_conn(*s.conns.begin()->second);
        s.stopped = true;
      } else {
        const std::set<uint64_t> dirty = std::move(s.dirty);
        s.dirty.clear();
        for (uint64_t id : dirty)
          if (auto it = s.conns.find(id); it != s.conns.end()) L.flush(*it->second);
        L.sweep();
      }
    }
    for (auto& f : gone) f();
    for (auto& ex : ready) handler_(ex);
    if (stop) return;
  }
}

void Server::stop_accepting() {
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->draining) return;
    shared_->draining = true;
    if (shared_->listenfd >= 0) {
      if (shared_->epfd >= 0) epoll_ctl(shared_->epfd, EPOLL_CTL_DEL, shared_->listenfd, nullptr);
      ::close(shared_->listenfd);
      shared_->listenfd = -1;
    }
  }
  shared_->wake();
}

int Server::busy_connections() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  int n = 0;
  for (const auto& kv : shared_->conns) n += kv.second->phase == Conn::Phase::Busy;
  return n;
}

void Server::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->stopping = true;
  }
  shared_->wake();
  thread_.join();
  std::lock_guard<std::mutex> lk(shared_->mu);
  ::close(shared_->wakefd);
  shared_->wakefd = -1;
}

void Server::count_busy() {
  std::lock_guard<std::mutex> lk(shared_->mu);
  ++shared_->counters.busy;
}

Counters Server::counters() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->counters;
}

}  // namespace dtcli::http
