// Mesh tensors (one piece per local rank) and the collectives over them. Every argument is
// checked here, before Mesh::run: an error inside run fails the whole mesh, and a bad
// argument must leave the mesh usable.
#include "comm/mesh.h"
#include "core/device.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;
using dt::comm::Mesh;

namespace {

// One collective call: the mesh, the canonical axis and its group size.
struct Call {
  Mesh& mesh;
  std::string axis;
  int n;
};

Call begin(dt_mesh* mesh, const char* axis) {
  Mesh& m = *need(mesh, "mesh")->mesh;
  std::string a = Mesh::canonical_axes(need(axis, "axis"));
  return Call{m, a, static_cast<int>(m.group_members(m.local_ranks()[0], a).size())};
}

// The pieces of `t`, which must be a mesh tensor of `mesh` on the CPU.
const std::vector<dt::Tensor>& pieces_of(const dt_mesh* mesh, const dt_tensor* t, const char* name) {
  need(t, name);
  const std::string n = name;
  DT_CHECK(t->mesh, n + " is not a mesh tensor (a plain tensor or a piece); create it with dt_tensor_create_on_mesh");
  DT_CHECK(t->mesh == mesh->mesh, n + " is a mesh tensor of another mesh; pass tensors created on this mesh");
  DT_CHECK(t->t.device().type == dt::DeviceType::CPU,
           n + " is on " + t->device_name + "; collectives of the C API accept CPU tensors");
  DT_ASSERT(t->pieces.size() == mesh->mesh->local_ranks().size());
  return t->pieces;
}

dt::kernels::ReduceOp op_of(int32_t op) {
  DT_CHECK(op >= DT_REDUCE_SUM && op <= DT_REDUCE_PROD,
           "op = " + std::to_string(op) +
               "; accepted: DT_REDUCE_SUM (0), DT_REDUCE_AVG (1), DT_REDUCE_MAX (2), DT_REDUCE_MIN (3), "
               "DT_REDUCE_PROD (4)");
  return static_cast<dt::kernels::ReduceOp>(op);
}

void check_root(const Call& c, int32_t root) {
  DT_CHECK(root >= 0 && root < c.n, "root = " + std::to_string(root) + "; accepted: 0 to " + std::to_string(c.n - 1) +
                                        " (the group over \"" + c.axis + "\" has " + std::to_string(c.n) + " ranks)");
}

void check_same_dtype(const dt::Tensor& send, const dt::Tensor& recv) {
  DT_CHECK(send.dtype() == recv.dtype(), std::string("recv has dtype ") + dt::dtype_name(recv.dtype()) +
                                             " and send " + dt::dtype_name(send.dtype()) + "; they must match");
}

// numel of `what` must be `want`; `rule` says why.
void check_numel(const char* what, int64_t got, int64_t want, const std::string& rule) {
  DT_CHECK(got == want, std::string(what) + " has " + std::to_string(got) + " elements per piece; required: " +
                            std::to_string(want) + " (" + rule + ")");
}

}  // namespace

extern "C" {

dt_status dt_tensor_create_on_mesh(dt_mesh* mesh, dt_dtype dtype, const int64_t* shape, int32_t ndim,
                                   const dt_options* options, dt_tensor** out) {
  return guard("dt_tensor_create_on_mesh", [&] {
    need(mesh, "mesh");
    need(out, "out");
    dt::DType dt_;
    dt::Shape s = dt::api::shape_arg(dtype, shape, ndim, &dt_);
    dt::OptionReader r(dt::api::opts_of(options), "dt_tensor_create_on_mesh", {"tag"});
    dt::MemTag tag = dt::parse_mem_tag(r.get_string("tag", "workspace").c_str(), "option \"tag\"");
    auto h = std::make_unique<dt_tensor>();
    for (size_t i = 0; i < mesh->mesh->local_ranks().size(); ++i)
      h->pieces.push_back(dt::Tensor::zeros(s, dt_, dt::Device::cpu(), tag));
    h->t = h->pieces[0];
    h->device_name = dt::Device::cpu().str();
    h->mesh = mesh->mesh;
    *out = h.release();
  });
}

dt_status dt_tensor_piece_count(const dt_tensor* tensor, int32_t* out) {
  return guard("dt_tensor_piece_count", [&] {
    need(tensor, "tensor");
    need(out, "out");
    *out = tensor->pieces.empty() ? 1 : static_cast<int32_t>(tensor->pieces.size());
  });
}

dt_status dt_tensor_piece(const dt_tensor* tensor, int32_t local_index, dt_tensor** out) {
  return guard("dt_tensor_piece", [&] {
    need(tensor, "tensor");
    need(out, "out");
    int32_t count = tensor->pieces.empty() ? 1 : static_cast<int32_t>(tensor->pieces.size());
    DT_CHECK(local_index >= 0 && local_index < count, "local_index = " + std::to_string(local_index) +
                                                          "; accepted: 0 to " + std::to_string(count - 1) +
                                                          " (the tensor has " + std::to_string(count) + " pieces)");
    // A plain tensor sharing the piece's storage: it needs neither the mesh nor the siblings.
    auto h = std::make_unique<dt_tensor>();
    h->t = tensor->pieces.empty() ? tensor->t : tensor->pieces[local_index];
    h->device_name = tensor->device_name;
    *out = h.release();
  });
}

dt_status dt_mesh_all_reduce(dt_mesh* mesh, const char* axis, dt_tensor* tensor, dt_reduce_op op) {
  return guard("dt_mesh_all_reduce", [&] {
    Call c = begin(mesh, axis);
    const auto& p = pieces_of(mesh, tensor, "tensor");
    auto rop = op_of(op);
    c.mesh.run([&](int i, int rank) {
      c.mesh.comm(rank, c.axis).all_reduce(p[i].raw(), p[i].raw(), p[i].numel(), p[i].dtype(), rop);
    });
  });
}

dt_status dt_mesh_all_gather(dt_mesh* mesh, const char* axis, const dt_tensor* send, dt_tensor* recv) {
  return guard("dt_mesh_all_gather", [&] {
    Call c = begin(mesh, axis);
    const auto& s = pieces_of(mesh, send, "send");
    const auto& r = pieces_of(mesh, recv, "recv");
    check_same_dtype(s[0], r[0]);
    check_numel("recv", r[0].numel(), c.n * s[0].numel(), "the group size times send's");
    c.mesh.run([&](int i, int rank) {
      c.mesh.comm(rank, c.axis).all_gather(s[i].raw(), r[i].raw(), s[i].numel(), s[i].dtype());
    });
  });
}

dt_status dt_mesh_reduce_scatter(dt_mesh* mesh, const char* axis, const dt_tensor* send, dt_tensor* recv,
                                 dt_reduce_op op) {
  return guard("dt_mesh_reduce_scatter", [&] {
    Call c = begin(mesh, axis);
    const auto& s = pieces_of(mesh, send, "send");
    const auto& r = pieces_of(mesh, recv, "recv");
    auto rop = op_of(op);
    check_same_dtype(s[0], r[0]);
    check_numel("send", s[0].numel(), c.n * r[0].numel(), "the group size times recv's");
    c.mesh.run([&](int i, int rank) {
      c.mesh.comm(rank, c.axis).reduce_scatter(s[i].raw(), r[i].raw(), r[i].numel(), s[i].dtype(), rop);
    });
  });
}

dt_status dt_mesh_broadcast(dt_mesh* mesh, const char* axis, dt_tensor* tensor, int32_t root) {
  return guard("dt_mesh_broadcast", [&] {
    Call c = begin(mesh, axis);
    const auto& p = pieces_of(mesh, tensor, "tensor");
    check_root(c, root);
    c.mesh.run([&](int i, int rank) {
      c.mesh.comm(rank, c.axis).broadcast(p[i].raw(), p[i].raw(), p[i].numel(), p[i].dtype(), root);
    });
  });
}

dt_status dt_mesh_reduce(dt_mesh* mesh, const char* axis, const dt_tensor* send, dt_tensor* recv, dt_reduce_op op,
                         int32_t root) {
  return guard("dt_mesh_reduce", [&] {
    Call c = begin(mesh, axis);
    const auto& s = pieces_of(mesh, send, "send");
    const auto& r = pieces_of(mesh, recv, "recv");
    auto rop = op_of(op);
    check_root(c, root);
    check_same_dtype(s[0], r[0]);
    check_numel("recv", r[0].numel(), s[0].numel(), "equal to send's");
    c.mesh.run([&](int i, int rank) {
      c.mesh.comm(rank, c.axis).reduce(s[i].raw(), r[i].raw(), s[i].numel(), s[i].dtype(), rop, root);
    });
  });
}

dt_status dt_mesh_all_to_all(dt_mesh* mesh, const char* axis, const dt_tensor* send, dt_tensor* recv) {
  return guard("dt_mesh_all_to_all", [&] {
    Call c = begin(mesh, axis);
    const auto& s = pieces_of(mesh, send, "send");
    const auto& r = pieces_of(mesh, recv, "recv");
    DT_CHECK(send != recv, "recv is send; all-to-all is never in place: pass a second mesh tensor");
    check_same_dtype(s[0], r[0]);
    DT_CHECK(s[0].numel() % c.n == 0, "send has " + std::to_string(s[0].numel()) +
                                          " elements per piece; required: a multiple of the group size " +
                                          std::to_string(c.n) + " (equal splits)");
    check_numel("recv", r[0].numel(), s[0].numel(), "equal to send's");
    std::vector<int64_t> counts(c.n, s[0].numel() / c.n);
    c.mesh.run([&](int i, int rank) {
      c.mesh.comm(rank, c.axis).all_to_all(s[i].raw(), counts, r[i].raw(), counts, s[i].dtype());
    });
  });
}

dt_status dt_mesh_barrier(dt_mesh* mesh, const char* axis) {
  return guard("dt_mesh_barrier", [&] {
    Call c = begin(mesh, axis);
    c.mesh.run([&](int, int rank) { c.mesh.comm(rank, c.axis).barrier(); });
  });
}

}  // extern "C"
