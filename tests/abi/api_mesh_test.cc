// The mesh through the C ABI, as a host would drive it: creation errors, queries, every
// collective on 4 local ranks, piece lifetimes, abort and the comm ledger.
#include "abi_util.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace DT_TEST_NS {

// A local mesh of `world` ranks with integer options {key, value}.
dt_mesh* make_mesh(int32_t world, std::initializer_list<std::pair<const char*, int64_t>> opts = {}) {
  dt_options* o = nullptr;
  EXPECT_EQ(dt_options_create(&o), DT_OK);
  for (auto& [k, v] : opts) EXPECT_EQ(dt_options_set_int(o, k, v), DT_OK);
  dt_mesh* m = nullptr;
  EXPECT_EQ(dt_mesh_create("local", world, o, &m), DT_OK) << dt_last_error_message();
  dt_options_destroy(o);
  return m;
}

dt_tensor* on_mesh(dt_mesh* m, int64_t numel, dt_dtype dtype = DT_F32) {
  dt_tensor* t = nullptr;
  EXPECT_EQ(dt_tensor_create_on_mesh(m, dtype, &numel, 1, nullptr, &t), DT_OK) << dt_last_error_message();
  return t;
}

// Piece i of a mesh tensor <-> host floats, through a piece handle.
void put(dt_tensor* t, int i, const std::vector<float>& v) {
  dt_tensor* p = nullptr;
  ASSERT_EQ(dt_tensor_piece(t, i, &p), DT_OK) << dt_last_error_message();
  ASSERT_EQ(dt_tensor_copy_from_host(p, v.data(), v.size() * 4), DT_OK) << dt_last_error_message();
  dt_tensor_destroy(p);
}
std::vector<float> get(const dt_tensor* t, int i) {
  dt_tensor* p = nullptr;
  int64_t n = 0;
  EXPECT_EQ(dt_tensor_piece(t, i, &p), DT_OK) << dt_last_error_message();
  EXPECT_EQ(dt_tensor_numel(p, &n), DT_OK);
  std::vector<float> v(n);
  EXPECT_EQ(dt_tensor_copy_to_host(p, v.data(), v.size() * 4), DT_OK) << dt_last_error_message();
  dt_tensor_destroy(p);
  return v;
}

TEST(Mesh, CreationErrorsNameTheArgument) {
  dt_mesh* m = nullptr;
  expect_error(dt_mesh_create("tcp", 4, nullptr, &m), DT_ERR_INVALID_ARGUMENT, {"backend \"tcp\"", "\"local\", \"mpi\""});
  expect_error(dt_mesh_create(nullptr, 4, nullptr, &m), DT_ERR_INVALID_ARGUMENT, {"backend is NULL"});
  expect_error(dt_mesh_create("local", 0, nullptr, &m), DT_ERR_INVALID_ARGUMENT, {"world_size = 0", "1 to 1024"});
  expect_error(dt_mesh_create("local", 4, nullptr, nullptr), DT_ERR_INVALID_ARGUMENT, {"out is NULL"});
  dt_options* o = nullptr;
  OK(dt_options_create(&o));
  OK(dt_options_set_int(o, "dp", 3));
  expect_error(dt_mesh_create("local", 4, o, &m), DT_ERR_INVALID_ARGUMENT, {"world size 4", "product", "3", "dp=3"});
  OK(dt_options_set_int(o, "dp", 2));
  OK(dt_options_set_int(o, "tp", 0));
  expect_error(dt_mesh_create("local", 4, o, &m), DT_ERR_INVALID_ARGUMENT, {"option \"tp\" = 0", "accepted: 1 to"});
  OK(dt_options_set_string(o, "tp", "2"));
  expect_error(dt_mesh_create("local", 4, o, &m), DT_ERR_INVALID_ARGUMENT, {"\"tp\"", "int"});
  OK(dt_options_set_int(o, "tp", 2));
  OK(dt_options_set_int(o, "timeout_ms", 0));
  expect_error(dt_mesh_create("local", 4, o, &m), DT_ERR_INVALID_ARGUMENT, {"\"timeout_ms\" = 0", "> 0"});
  OK(dt_options_set_int(o, "timeout_ms", 5000));
  OK(dt_options_set_int(o, "dpp", 2));
  expect_error(dt_mesh_create("local", 4, o, &m), DT_ERR_INVALID_ARGUMENT,
               {"\"dpp\"", "dp", "tp", "timeout_ms", "check_args"});
  dt_options_destroy(o);
  EXPECT_EQ(m, nullptr);  // untouched on failure
  dt_mesh_destroy(nullptr);
}

TEST(Mesh, QueriesAndCoordinates) {
  dt_mesh* m = make_mesh(4, {{"dp", 2}, {"tp", 2}});
  ASSERT_NE(m, nullptr);
  int32_t v = -1;
  const char* name = nullptr;
  OK(dt_mesh_backend(m, &name));
  EXPECT_STREQ(name, "local");
  OK(dt_mesh_world_size(m, &v));
  EXPECT_EQ(v, 4);
  OK(dt_mesh_local_rank_count(m, &v));
  EXPECT_EQ(v, 4);
  for (int i = 0; i < 4; ++i) {
    OK(dt_mesh_local_rank(m, i, &v));
    EXPECT_EQ(v, i);
  }
  const std::pair<const char*, int> sizes[] = {{"dp", 2}, {"tp", 2}, {"pp", 1}, {"tp*dp", 4}, {"world", 4}};
  for (auto& [axis, n] : sizes) {
    OK(dt_mesh_axis_size(m, axis, &v));
    EXPECT_EQ(v, n) << axis;
  }
  // tp is innermost: rank = dp * 2 + tp.
  for (int r = 0; r < 4; ++r) {
    OK(dt_mesh_coord(m, r, "dp", &v));
    EXPECT_EQ(v, r / 2);
    OK(dt_mesh_coord(m, r, "tp", &v));
    EXPECT_EQ(v, r % 2);
    OK(dt_mesh_coord(m, r, "world", &v));
    EXPECT_EQ(v, r);
  }
  expect_error(dt_mesh_local_rank(m, 4, &v), DT_ERR_INVALID_ARGUMENT, {"local_index = 4", "0 to 3"});
  expect_error(dt_mesh_coord(m, 4, "dp", &v), DT_ERR_INVALID_ARGUMENT, {"rank = 4", "0 to 3"});
  expect_error(dt_mesh_axis_size(m, "xp", &v), DT_ERR_INVALID_ARGUMENT, {"\"xp\"", "dp, pp, ep, cp, tp", "world"});
  expect_error(dt_mesh_world_size(nullptr, &v), DT_ERR_INVALID_ARGUMENT, {"mesh is NULL"});
  dt_mesh_destroy(m);
  // No axis given: every rank is data parallel.
  m = make_mesh(3);
  OK(dt_mesh_axis_size(m, "dp", &v));
  EXPECT_EQ(v, 3);
  dt_mesh_destroy(m);
}

TEST(Mesh, EveryCollectiveOnFourLocalRanks) {
  dt_mesh* m = make_mesh(4, {{"dp", 2}, {"tp", 2}});
  ASSERT_NE(m, nullptr);
  // all_reduce over the world (sum) and over tp (max), in place.
  dt_tensor* x = on_mesh(m, 3);
  for (int r = 0; r < 4; ++r) put(x, r, {float(r), float(10 * r), 1});
  OK(dt_mesh_all_reduce(m, "world", x, DT_REDUCE_SUM));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(get(x, r), (std::vector<float>{6, 60, 4}));
  for (int r = 0; r < 4; ++r) put(x, r, {float(r), float(-r), float(r % 2)});
  OK(dt_mesh_all_reduce(m, "tp", x, DT_REDUCE_MAX));
  EXPECT_EQ(get(x, 0), (std::vector<float>{1, 0, 1}));  // tp group {0, 1}
  EXPECT_EQ(get(x, 3), (std::vector<float>{3, -2, 1}));  // tp group {2, 3}
  // all_gather over tp: [piece of tp 0, piece of tp 1].
  dt_tensor* g = on_mesh(m, 6);
  for (int r = 0; r < 4; ++r) put(x, r, {float(r), float(r), float(r)});
  OK(dt_mesh_all_gather(m, "tp", x, g));
  EXPECT_EQ(get(g, 1), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(get(g, 2), (std::vector<float>{2, 2, 2, 3, 3, 3}));
  // reduce_scatter over the world: rank r gets block r of the sum.
  dt_tensor* s8 = on_mesh(m, 8);
  dt_tensor* s2 = on_mesh(m, 2);
  for (int r = 0; r < 4; ++r) put(s8, r, {0, 1, 2, 3, 4, 5, 6, float(7 + r)});
  OK(dt_mesh_reduce_scatter(m, "world", s8, s2, DT_REDUCE_SUM));
  EXPECT_EQ(get(s2, 0), (std::vector<float>{0, 4}));
  EXPECT_EQ(get(s2, 3), (std::vector<float>{24, 34}));  // 4*6, 4*7 + 0+1+2+3
  // broadcast over dp from dp coordinate 1: ranks 0, 2 get rank 2's; ranks 1, 3 rank 3's.
  for (int r = 0; r < 4; ++r) put(x, r, {float(r), 0, 0});
  OK(dt_mesh_broadcast(m, "dp", x, 1));
  EXPECT_EQ(get(x, 0)[0], 2);
  EXPECT_EQ(get(x, 1)[0], 3);
  // reduce (prod) over the world to root 2; the other recv pieces keep their values.
  dt_tensor* y = on_mesh(m, 3);
  for (int r = 0; r < 4; ++r) {
    put(x, r, {float(r + 1), 2, 1});
    put(y, r, {-1, -1, -1});
  }
  OK(dt_mesh_reduce(m, "world", x, y, DT_REDUCE_PROD, 2));
  EXPECT_EQ(get(y, 2), (std::vector<float>{24, 16, 1}));
  EXPECT_EQ(get(y, 0), (std::vector<float>{-1, -1, -1}));
  // all_to_all over the world: block j of rank r goes to rank j, at position r.
  dt_tensor* a = on_mesh(m, 8);
  dt_tensor* b = on_mesh(m, 8);
  for (int r = 0; r < 4; ++r) {
    std::vector<float> v(8);
    for (int k = 0; k < 8; ++k) v[k] = float(10 * r + k);
    put(a, r, v);
  }
  OK(dt_mesh_all_to_all(m, "world", a, b));
  EXPECT_EQ(get(b, 1), (std::vector<float>{2, 3, 12, 13, 22, 23, 32, 33}));
  OK(dt_mesh_barrier(m, "dp*tp"));
  OK(dt_mesh_all_reduce(m, "dp", x, DT_REDUCE_AVG));
  EXPECT_EQ(get(x, 1)[0], 3);  // (2 + 4) / 2
  for (dt_tensor* t : {x, g, s8, s2, y, a, b}) dt_tensor_destroy(t);
  dt_mesh_destroy(m);
}

TEST(Mesh, BadCollectiveArgumentsLeaveTheMeshUsable) {
  dt_mesh* m = make_mesh(4, {{"dp", 2}, {"tp", 2}});
  dt_mesh* other = make_mesh(2);
  dt_tensor* x = on_mesh(m, 4);
  dt_tensor* y = on_mesh(m, 6);
  dt_tensor* h = on_mesh(m, 4, DT_F16);
  dt_tensor* foreign = on_mesh(other, 4);
  dt_tensor* plain = nullptr;
  int64_t four = 4;
  OK(dt_tensor_create(DT_F32, &four, 1, "cpu", nullptr, &plain));
  dt_tensor* piece = nullptr;
  OK(dt_tensor_piece(x, 0, &piece));
  expect_error(dt_mesh_all_reduce(m, "world", plain, DT_REDUCE_SUM), DT_ERR_INVALID_ARGUMENT,
               {"tensor is not a mesh tensor", "dt_tensor_create_on_mesh"});
  expect_error(dt_mesh_all_reduce(m, "world", piece, DT_REDUCE_SUM), DT_ERR_INVALID_ARGUMENT, {"not a mesh tensor"});
  expect_error(dt_mesh_all_reduce(m, "world", foreign, DT_REDUCE_SUM), DT_ERR_INVALID_ARGUMENT, {"another mesh"});
  expect_error(dt_mesh_all_reduce(m, "world", x, 7), DT_ERR_INVALID_ARGUMENT, {"op = 7", "DT_REDUCE_PROD (4)"});
  expect_error(dt_mesh_all_reduce(m, "wrld", x, 0), DT_ERR_INVALID_ARGUMENT, {"\"wrld\"", "world"});
  expect_error(dt_mesh_broadcast(m, "tp", x, 2), DT_ERR_INVALID_ARGUMENT, {"root = 2", "0 to 1", "\"tp\""});
  expect_error(dt_mesh_all_gather(m, "tp", x, y), DT_ERR_INVALID_ARGUMENT, {"recv has 6", "8"});
  expect_error(dt_mesh_all_gather(m, "tp", x, foreign), DT_ERR_INVALID_ARGUMENT, {"recv is a mesh tensor of another"});
  expect_error(dt_mesh_reduce(m, "tp", x, h, 0, 0), DT_ERR_INVALID_ARGUMENT, {"dtype f16", "f32"});
  expect_error(dt_mesh_all_to_all(m, "world", x, x), DT_ERR_INVALID_ARGUMENT, {"never in place"});
  expect_error(dt_mesh_all_to_all(m, "world", y, y), DT_ERR_INVALID_ARGUMENT, {"never in place"});
  expect_error(dt_mesh_barrier(nullptr, "world"), DT_ERR_INVALID_ARGUMENT, {"mesh is NULL"});
  // Data calls on a tensor of several pieces point to dt_tensor_piece; queries describe a piece.
  std::vector<float> buf(4);
  expect_error(dt_tensor_copy_from_host(x, buf.data(), 16), DT_ERR_INVALID_ARGUMENT, {"4 pieces", "dt_tensor_piece"});
  expect_error(dt_tensor_copy_to_host(x, buf.data(), 16), DT_ERR_INVALID_ARGUMENT, {"dt_tensor_piece"});
  expect_error(dt_tensor_fill_normal(x, 1, "w", 0, 0, 1), DT_ERR_INVALID_ARGUMENT, {"dt_tensor_piece"});
  int64_t n = 0;
  int32_t pieces = 0;
  OK(dt_tensor_numel(x, &n));
  EXPECT_EQ(n, 4);
  OK(dt_tensor_piece_count(x, &pieces));
  EXPECT_EQ(pieces, 4);
  OK(dt_tensor_piece_count(plain, &pieces));
  EXPECT_EQ(pieces, 1);
  dt_tensor* p = nullptr;
  expect_error(dt_tensor_piece(x, 4, &p), DT_ERR_INVALID_ARGUMENT, {"local_index = 4", "0 to 3"});
  expect_error(dt_tensor_piece(plain, 1, &p), DT_ERR_INVALID_ARGUMENT, {"local_index = 1", "0 to 0"});
  // None of this failed the mesh.
  put(x, 0, {1, 1, 1, 1});
  OK(dt_mesh_all_reduce(m, "world", x, DT_REDUCE_SUM));
  EXPECT_EQ(get(x, 3), (std::vector<float>{1, 1, 1, 1}));
  for (dt_tensor* t : {x, y, h, foreign, plain, piece}) dt_tensor_destroy(t);
  dt_mesh_destroy(other);
  dt_mesh_destroy(m);
}

TEST(Mesh, PiecesAndTensorsOutliveTheMesh) {
  int64_t before = 0, after = 0;
  OK(dt_memory_stats("cpu", DT_MEM_ALL, &before, nullptr));
  dt_mesh* m = make_mesh(2);
  dt_tensor* x = on_mesh(m, 5);
  put(x, 1, {1, 2, 3, 4, 5});
  OK(dt_mesh_all_reduce(m, "dp", x, DT_REDUCE_SUM));
  dt_mesh_destroy(m);  // the tensor still holds the mesh
  dt_tensor* p = nullptr;
  OK(dt_tensor_piece(x, 0, &p));
  dt_tensor_destroy(x);  // the piece still holds its storage
  std::vector<float> v(5);
  OK(dt_tensor_copy_to_host(p, v.data(), 20));
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 4, 5}));
  OK(dt_tensor_fill_uniform(p, 3, "p", 0, 0, 1));  // a piece is a plain tensor
  dt_tensor_destroy(p);
  OK(dt_memory_stats("cpu", DT_MEM_ALL, &after, nullptr));
  EXPECT_EQ(after, before);
}

TEST(Mesh, AbortBeforeACallPersists) {
  dt_mesh* m = make_mesh(4);
  dt_tensor* x = on_mesh(m, 4);
  OK(dt_mesh_abort(m));
  expect_error(dt_mesh_barrier(m, "world"), DT_ERR_ABORTED, {"dt_mesh_barrier", "aborted", "dt_mesh_abort"});
  expect_error(dt_mesh_all_reduce(m, "world", x, DT_REDUCE_SUM), DT_ERR_ABORTED, {"aborted"});
  int32_t v = 0;
  OK(dt_mesh_world_size(m, &v));  // queries still answer
  expect_error(dt_mesh_abort(nullptr), DT_ERR_INVALID_ARGUMENT, {"mesh is NULL"});
  dt_tensor_destroy(x);
  dt_mesh_destroy(m);
}

// Another host thread aborts while this one keeps the ranks inside collectives: the call
// in flight (or the next) returns DT_ERR_ABORTED well within a second, and so do later ones.
TEST(Mesh, AbortFromAnotherHostThreadWhileCollectivesRun) {
  dt_mesh* m = make_mesh(4, {{"dp", 2}, {"tp", 2}});
  dt_tensor* x = on_mesh(m, 1 << 16);
  std::atomic<bool> aborted{false};
  std::chrono::steady_clock::time_point abort_time;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort_time = std::chrono::steady_clock::now();
    aborted = true;
    EXPECT_EQ(dt_mesh_abort(m), DT_OK);
  });
  dt_status s = DT_OK;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; s == DT_OK && std::chrono::steady_clock::now() < give_up; ++i)
    s = i % 2 ? dt_mesh_barrier(m, "world") : dt_mesh_all_reduce(m, i % 4 ? "tp" : "dp", x, DT_REDUCE_SUM);
  auto end = std::chrono::steady_clock::now();
  killer.join();
  EXPECT_EQ(s, DT_ERR_ABORTED) << dt_last_error_message();
  EXPECT_TRUE(aborted.load());
  EXPECT_LT(std::chrono::duration<double>(end - abort_time).count(), 1.0);
  expect_error(dt_mesh_barrier(m, "tp"), DT_ERR_ABORTED, {"aborted"});
  dt_tensor_destroy(x);
  dt_mesh_destroy(m);
}

TEST(Mesh, CommLedgerStatsAndJson) {
  dt_mesh* m = make_mesh(4, {{"dp", 2}, {"tp", 2}});
  dt_tensor* x = on_mesh(m, 16);
  OK(dt_mesh_all_reduce(m, "tp", x, DT_REDUCE_SUM));
  OK(dt_mesh_all_reduce(m, "tp", x, DT_REDUCE_SUM));
  OK(dt_mesh_barrier(m, "tp*dp"));
  int64_t calls = -1, bytes = -1;
  double secs = -1;
  OK(dt_mesh_comm_stats(m, 3, "tp", "all_reduce", &calls, &bytes, &secs));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(bytes, 2 * 16 * 4);
  EXPECT_GE(secs, 0);
  OK(dt_mesh_comm_stats(m, 0, "dp*tp", "barrier", &calls, nullptr, nullptr));
  EXPECT_EQ(calls, 1);
  OK(dt_mesh_comm_stats(m, 0, "dp", "all_reduce", &calls, &bytes, nullptr));  // never used
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(bytes, 0);
  expect_error(dt_mesh_comm_stats(m, 0, "tp", "allreduce", &calls, nullptr, nullptr), DT_ERR_INVALID_ARGUMENT,
               {"\"allreduce\"", "\"all_reduce\"", "\"barrier\""});
  expect_error(dt_mesh_comm_stats(m, 9, "tp", "all_reduce", &calls, nullptr, nullptr), DT_ERR_INVALID_ARGUMENT,
               {"rank = 9", "0 to 3"});
  size_t need = 0;
  OK(dt_mesh_comm_report_json(m, nullptr, 0, &need));
  std::string json(need, '\0');
  OK(dt_mesh_comm_report_json(m, &json[0], need, &need));
  json.resize(need - 1);
  EXPECT_EQ(json.rfind("{\"backend\":\"local\",\"ranks\":[{\"rank\":0,\"axes\":{\"dp*tp\":{", 0), 0u) << json;
  EXPECT_NE(json.find("\"tp\":{\"all_reduce\":{\"calls\":2,\"bytes\":128,"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"rank\":3,\"axes\":{"), std::string::npos) << json;
  EXPECT_EQ(json.substr(json.size() - 3), "}]}");
  char small[10];
  OK(dt_mesh_comm_report_json(m, small, sizeof small, &need));
  EXPECT_EQ(std::string(small), json.substr(0, 9));
  expect_error(dt_mesh_comm_report_json(m, nullptr, 4, &need), DT_ERR_INVALID_ARGUMENT, {"buf is NULL"});
  dt_tensor_destroy(x);
  dt_mesh_destroy(m);
}

// dt_shutdown finalizes only an MPI libdtrain started: in a process that never made an
// "mpi" mesh it does nothing, any number of times, and local meshes keep working.
TEST(Shutdown, WithoutMpiStartedIsANoOpAndLocalMeshesGoOn) {
  OK(dt_shutdown());
  OK(dt_shutdown());
  dt_mesh* m = nullptr;
  OK(dt_mesh_create("local", 2, nullptr, &m));
  OK(dt_mesh_barrier(m, "world"));
  dt_mesh_destroy(m);
}

}  // namespace
