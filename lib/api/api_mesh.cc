// dt_mesh: creation from options, queries, abort and the comm ledger. Mesh tensors and
// collectives are in api_mesh_tensor.cc.
#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "comm/mesh.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;
using dt::comm::Mesh;

namespace {

Mesh& mesh_of(const dt_mesh* m) { return *need(m, "mesh")->mesh; }

// Validates `axis` (the message lists the accepted names) and returns its canonical form.
std::string axis_of(const char* axis) { return Mesh::canonical_axes(need(axis, "axis")); }

int32_t local_index_of(const Mesh& m, int32_t rank) {
  const auto& local = m.local_ranks();
  auto it = std::find(local.begin(), local.end(), rank);
  if (it == local.end())
    dt::invalid("rank = " + std::to_string(rank) + "; accepted: a rank this process drives (" +
                (local.size() == 1 ? std::to_string(local[0])
                                   : std::to_string(local.front()) + " to " + std::to_string(local.back())) +
                ")");
  return static_cast<int32_t>(it - local.begin());
}

void check_world_rank(const Mesh& m, int32_t rank) {
  DT_CHECK(rank >= 0 && rank < m.world_size(),
           "rank = " + std::to_string(rank) + "; accepted: 0 to " + std::to_string(m.world_size() - 1));
}

dt::comm::CollKind kind_of(const char* kind) {
  need(kind, "kind");
  std::string accepted;
  for (int k = 0; k < dt::comm::kNumCollKinds; ++k) {
    const char* name = dt::comm::coll_name(static_cast<dt::comm::CollKind>(k));
    if (std::strcmp(kind, name) == 0) return static_cast<dt::comm::CollKind>(k);
    accepted += std::string(k ? ", " : "") + "\"" + name + "\"";
  }
  dt::invalid(std::string("kind \"") + kind + "\" is unknown; accepted: " + accepted);
}


}  // namespace

extern "C" {

dt_status dt_mesh_create(const char* backend, int32_t world_size, const dt_options* options, dt_mesh** out) {
  return guard("dt_mesh_create", [&] {
    need(out, "out");
    std::string b = need(backend, "backend");
    DT_CHECK(b == "local" || b == "mpi", "backend \"" + b + "\" is unknown; accepted: \"local\", \"mpi\"");
    if (b == "local")
      DT_CHECK(world_size >= 1 && world_size <= 1024, "world_size = " + std::to_string(world_size) +
                                                          "; accepted for backend \"local\": 1 to 1024 (rank threads)");
    else
      DT_CHECK(world_size >= 0, "world_size = " + std::to_string(world_size) +
                                    "; accepted for backend \"mpi\": 0 (the MPI world) or the MPI world's size");
    dt::OptionReader r(dt::api::opts_of(options), "dt_mesh_create",
                       {"dp", "pp", "ep", "cp", "tp", "timeout_ms", "check_args"});
    dt::comm::Coords axes{};
    for (int a = 0; a < dt::comm::kNumAxes; ++a) {
      const char* name = dt::comm::axis_name(a);
      int64_t v = r.get_int(name, 1);
      DT_CHECK(v >= 1 && v <= (1 << 20),
               std::string("option \"") + name + "\" = " + std::to_string(v) + "; accepted: 1 to 2^20 (an axis size)");
      axes[a] = static_cast<int>(v);
    }
    // dp not given: the world over the other axes (all of it when none is given). dp = 0
    // asks the mesh to take it from the backend's world, which under mpi with world_size 0
    // is known only there.
    if (!r.has("dp")) axes[dt::comm::kDp] = 0;
    int64_t timeout_ms = r.get_int("timeout_ms", 300000);
    DT_CHECK(timeout_ms > 0, "option \"timeout_ms\" = " + std::to_string(timeout_ms) + "; accepted: > 0");
    dt::comm::BackendOptions bo;
    bo.world_size = world_size;
    bo.timeout_s = static_cast<double>(timeout_ms) / 1000.0;
    bo.check_args = r.get_bool("check_args", true);
    auto m = Mesh::create(b, axes, bo);
    DT_CHECK(world_size == 0 || m->world_size() == world_size,
             "world_size = " + std::to_string(world_size) + " but the " + b + " world has " +
                 std::to_string(m->world_size()) + " ranks; pass 0 to take the world as it is");
    *out = new dt_mesh{std::move(m)};
  });
}

void dt_mesh_destroy(dt_mesh* mesh) { delete mesh; }

dt_status dt_mesh_world_size(const dt_mesh* mesh, int32_t* out) {
  return guard("dt_mesh_world_size", [&] {
    need(out, "out");
    *out = mesh_of(mesh).world_size();
  });
}

dt_status dt_mesh_local_rank_count(const dt_mesh* mesh, int32_t* out) {
  return guard("dt_mesh_local_rank_count", [&] {
    need(out, "out");
    *out = static_cast<int32_t>(mesh_of(mesh).local_ranks().size());
  });
}

dt_status dt_mesh_local_rank(const dt_mesh* mesh, int32_t local_index, int32_t* rank) {
  return guard("dt_mesh_local_rank", [&] {
    const auto& local = mesh_of(mesh).local_ranks();
    need(rank, "rank");
    DT_CHECK(local_index >= 0 && local_index < static_cast<int32_t>(local.size()),
             "local_index = " + std::to_string(local_index) + "; accepted: 0 to " + std::to_string(local.size() - 1) +
                 " (this process drives " + std::to_string(local.size()) + " ranks)");
    *rank = local[local_index];
  });
}

dt_status dt_mesh_axis_size(const dt_mesh* mesh, const char* axis, int32_t* size) {
  return guard("dt_mesh_axis_size", [&] {
    Mesh& m = mesh_of(mesh);
    std::string a = axis_of(axis);
    need(size, "size");
    *size = static_cast<int32_t>(m.group_members(0, a).size());
  });
}

dt_status dt_mesh_coord(const dt_mesh* mesh, int32_t rank, const char* axis, int32_t* coord) {
  return guard("dt_mesh_coord", [&] {
    Mesh& m = mesh_of(mesh);
    std::string a = axis_of(axis);
    need(coord, "coord");
    check_world_rank(m, rank);
    auto members = m.group_members(rank, a);
    *coord = static_cast<int32_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  });
}

dt_status dt_mesh_backend(const dt_mesh* mesh, const char** name) {
  return guard("dt_mesh_backend", [&] {
    need(name, "name");
    *name = mesh_of(mesh).backend();
  });
}

dt_status dt_mesh_abort(dt_mesh* mesh) {
  return guard("dt_mesh_abort", [&] { mesh_of(mesh).abort("dt_mesh_abort was called"); });
}

dt_status dt_mesh_comm_stats(dt_mesh* mesh, int32_t rank, const char* axis, const char* kind, int64_t* calls,
                             int64_t* bytes, double* seconds) {
  return guard("dt_mesh_comm_stats", [&] {
    Mesh& m = mesh_of(mesh);
    local_index_of(m, rank);
    std::string a = axis_of(axis);
    dt::comm::CollKind k = kind_of(kind);
    dt::comm::CollStats st;
    if (dt::comm::Communicator* c = m.find_comm(rank, a)) st = c->ledger().get(k);
    if (calls) *calls = st.calls;
    if (bytes) *bytes = st.bytes;
    if (seconds) *seconds = st.seconds;
  });
}

dt_status dt_mesh_comm_wire_bytes(dt_mesh* mesh, int32_t rank, const char* axis, const char* kind,
                                  int64_t* wire_bytes) {
  return guard("dt_mesh_comm_wire_bytes", [&] {
    need(wire_bytes, "wire_bytes");
    Mesh& m = mesh_of(mesh);
    local_index_of(m, rank);
    std::string a = axis_of(axis);
    dt::comm::CollKind k = kind_of(kind);
    dt::comm::Communicator* c = m.find_comm(rank, a);
    *wire_bytes = c ? c->ledger().get(k).wire_bytes : 0;
  });
}

dt_status dt_mesh_comm_report_json(dt_mesh* mesh, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_mesh_comm_report_json", [&] {
    Mesh& m = mesh_of(mesh);
    auto comms = m.created_comms();
    std::string json = std::string("{\"backend\":\"") + m.backend() + "\",\"ranks\":[";
    bool first_rank = true;
    for (int rank : m.local_ranks()) {
      json += std::string(first_rank ? "" : ",") + "{\"rank\":" + std::to_string(rank) + ",\"axes\":{";
      first_rank = false;
      bool first_axis = true;
      for (const auto& [r, axes] : comms) {
        if (r != rank) continue;
        dt::comm::Communicator* c = m.find_comm(r, axes);
        if (!c) continue;
        json += std::string(first_axis ? "" : ",") + "\"" + axes + "\":" + c->ledger().json();
        first_axis = false;
      }
      json += "}}";
    }
    json += "]}";
    dt::api::write_text(json, buf, capacity, needed);
  });
}

dt_status dt_mesh_comm_history_json(dt_mesh* mesh, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_mesh_comm_history_json", [&] {
    Mesh& m = mesh_of(mesh);
    // The mesh's error, if it has one: usually what the report is read for.
    std::string failure = "null";
    try {
      m.check_healthy();
    } catch (const dt::Error& e) {
      failure = "{\"status\":\"" + std::string(dt_status_string(e.code())) + "\",\"message\":" +
                nlohmann::json(e.what()).dump() + "}";
    }
    std::string json = std::string("{\"backend\":\"") + m.backend() + "\",\"failure\":" + failure + ",\"ranks\":[";
    bool first = true;
    for (int rank : m.local_ranks()) {
      json += std::string(first ? "" : ",") + "{\"rank\":" + std::to_string(rank) + ",\"calls\":" +
              m.history_json(rank) + "}";
      first = false;
    }
    dt::api::write_text(json + "]}", buf, capacity, needed);
  });
}

}  // extern "C"
