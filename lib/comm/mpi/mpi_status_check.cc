// The status check behind a timeout message. MPI cannot say which rank a collective waits
// for, so a rank whose wait passes its deadline asks each peer, over a communicator used
// for nothing else, how far it got on that communicator, and waits a short while for the
// answers. A peer answers from its own poll loop (any wait, test or issue of the library),
// so a peer that is waiting in some call answers at once; a stopped, dead or cut-off peer,
// or one computing outside the library, does not: those are the ranks the message names.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "comm/mpi/mpi_world.h"

namespace dt::comm::mpi {
namespace {

constexpr int kAskTag = 1, kAnswerTag = 2;

struct StatusMsg {
  int32_t channel = -1;  // the asked communicator, by creation order; -1: only "are you there"
  int32_t origin = 0;    // the rank that sends this message
  int64_t issued = 0, finished = 0;
};

std::string list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace

struct World::StatusDesk {
  StatusMsg ask;  // the posted receive of peers' questions
  MPI_Request ask_req = MPI_REQUEST_NULL;
  // Buffers of sends that are never waited for, and of receives that may never complete:
  // MPI may touch them until the end of the process.
  std::vector<std::shared_ptr<StatusMsg>> in_flight;
};

int World::add_channel_locked() {
  progress_.emplace_back();
  return static_cast<int>(progress_.size()) - 1;
}

double World::status_check_s() const { return std::min(1.0, std::max(0.2, timeout_s_ / 4)); }

void World::open_status_desk_locked() {
  desk_ = std::make_shared<StatusDesk>();
  if (MPI_Irecv(&desk_->ask, sizeof(StatusMsg), MPI_BYTE, MPI_ANY_SOURCE, kAskTag, status_, &desk_->ask_req) !=
      MPI_SUCCESS)
    desk_->ask_req = MPI_REQUEST_NULL;  // then this rank never answers: peers name it late
}

void World::close_status_desk_locked() {
  if (!desk_->in_flight.empty()) keep_forever(desk_);  // sends never waited for may still read them
  if (desk_->ask_req == MPI_REQUEST_NULL) return;
  MPI_Cancel(&desk_->ask_req);
  MPI_Wait(&desk_->ask_req, MPI_STATUS_IGNORE);
}

void World::answer_status_asks_locked() {
  StatusDesk& d = *desk_;
  while (d.ask_req != MPI_REQUEST_NULL) {
    int flag = 0;
    if (MPI_Test(&d.ask_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) return;
    auto answer = std::make_shared<StatusMsg>();
    answer->channel = d.ask.channel;
    answer->origin = rank_;
    if (d.ask.channel >= 0 && d.ask.channel < static_cast<int32_t>(progress_.size())) {
      answer->issued = progress_[static_cast<size_t>(d.ask.channel)].issued;
      answer->finished = progress_[static_cast<size_t>(d.ask.channel)].finished;
    }
    MPI_Request r = MPI_REQUEST_NULL;
    if (MPI_Isend(answer.get(), sizeof(StatusMsg), MPI_BYTE, d.ask.origin, kAnswerTag, status_, &r) == MPI_SUCCESS)
      MPI_Request_free(&r);  // completes on its own; the buffer is kept below
    d.in_flight.push_back(std::move(answer));
    if (MPI_Irecv(&d.ask, sizeof(StatusMsg), MPI_BYTE, MPI_ANY_SOURCE, kAskTag, status_, &d.ask_req) != MPI_SUCCESS)
      d.ask_req = MPI_REQUEST_NULL;
  }
}

std::string World::status_check_locked(int channel, int64_t seq, const std::vector<int>& members) {
  StatusDesk& d = *desk_;
  struct Peer {
    int rank;
    std::shared_ptr<StatusMsg> answer = std::make_shared<StatusMsg>();
    MPI_Request req = MPI_REQUEST_NULL;
    bool answered = false;
  };
  std::vector<Peer> peers;
  auto ask = std::make_shared<StatusMsg>();
  ask->channel = channel;
  ask->origin = rank_;
  d.in_flight.push_back(ask);
  for (int p : members) {
    if (p == rank_) continue;
    Peer peer{p};
    MPI_Request r = MPI_REQUEST_NULL;
    if (MPI_Isend(ask.get(), sizeof(StatusMsg), MPI_BYTE, p, kAskTag, status_, &r) == MPI_SUCCESS)
      MPI_Request_free(&r);
    if (MPI_Irecv(peer.answer.get(), sizeof(StatusMsg), MPI_BYTE, p, kAnswerTag, status_, &peer.req) != MPI_SUCCESS)
      peer.req = MPI_REQUEST_NULL;
    peers.push_back(std::move(peer));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(status_check_s());
  for (;;) {
    answer_status_asks_locked();  // a peer timing out at the same moment asks this rank too
    bool all = true;
    for (Peer& p : peers) {
      if (!p.answered && p.req != MPI_REQUEST_NULL) {
        int flag = 0;
        if (MPI_Test(&p.req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) p.answered = true;
      }
      all = all && p.answered;
    }
    if (all || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> late;
  std::string silent, behind, waiting;
  for (Peer& p : peers) {
    if (!p.answered) {
      if (p.req != MPI_REQUEST_NULL) MPI_Cancel(&p.req), MPI_Request_free(&p.req);
      d.in_flight.push_back(p.answer);  // a late answer may still land in it
      late.push_back(p.rank);
      silent += (silent.empty() ? "" : ", ") + std::to_string(p.rank);
    } else if (channel >= 0 && p.answer->issued < seq) {
      late.push_back(p.rank);
      behind += std::string(behind.empty() ? "" : ", ") + "rank " + std::to_string(p.rank) + " last called seq " +
                std::to_string(p.answer->issued);
    } else if (channel >= 0) {
      waiting += std::string(waiting.empty() ? "" : ", ") + std::to_string(p.rank);
    }
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2g", status_check_s());
  std::vector<std::string> facts;
  if (!silent.empty())
    facts.push_back("rank(s) " + silent + " did not answer a status check within " + secs +
                    " s: stopped, dead, cut off, or busy outside libdtrain");
  if (!behind.empty()) facts.push_back(behind);
  if (!waiting.empty()) facts.push_back("rank(s) " + waiting + " called it too");
  std::string why;
  for (const std::string& f : facts) why += (why.empty() ? "" : "; ") + f;
  if (late.empty())
    return channel >= 0 ? "every rank called it (" + why + "): the transport stalled or a rank is stuck in MPI"
                        : "every rank answered a status check";
  std::sort(late.begin(), late.end());
  return "rank(s) " + list(late) + " did not arrive (" + why + ")";
}

}  // namespace dt::comm::mpi
