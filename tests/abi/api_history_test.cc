// dt_mesh_comm_history_json through the C ABI: each local rank's last collectives with
// their sequence numbers and outcomes, the mesh's error once it has one, and bad input.
#include "abi_util.h"

#include <string>

namespace DT_TEST_NS {

std::string history(dt_mesh* m) {
  size_t need = 0;
  EXPECT_EQ(dt_mesh_comm_history_json(m, nullptr, 0, &need), DT_OK) << dt_last_error_message();
  std::string json(need, '\0');
  EXPECT_EQ(dt_mesh_comm_history_json(m, &json[0], need, &need), DT_OK) << dt_last_error_message();
  json.resize(need - 1);
  return json;
}

TEST(History, ListsEachRanksCallsAndTheMeshError) {
  dt_mesh* m = nullptr;
  OK(dt_mesh_create("local", 2, nullptr, &m));
  EXPECT_EQ(history(m), "{\"backend\":\"local\",\"failure\":null,\"ranks\":[{\"rank\":0,\"calls\":[]},"
                        "{\"rank\":1,\"calls\":[]}]}");
  dt_tensor* x = nullptr;
  int64_t shape[1] = {3};
  OK(dt_tensor_create_on_mesh(m, DT_F32, shape, 1, nullptr, &x));
  OK(dt_mesh_all_reduce(m, "dp", x, DT_REDUCE_SUM));
  OK(dt_mesh_barrier(m, "dp"));
  std::string h = history(m);
  EXPECT_NE(h.find("{\"rank\":1,\"calls\":[{\"seq\":1,\"kind\":\"all_reduce\",\"axis\":\"dp\",\"bytes\":12,"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("{\"seq\":2,\"kind\":\"barrier\",\"axis\":\"dp\",\"bytes\":0,"), std::string::npos) << h;
  EXPECT_EQ(h.find("running"), std::string::npos) << h;

  OK(dt_mesh_abort(m));
  h = history(m);  // a failed mesh still reports, with its error
  EXPECT_NE(h.find("\"failure\":{\"status\":\"DT_ERR_ABORTED\",\"message\":\"aborted: dt_mesh_abort was called\"}"),
            std::string::npos)
      << h;
  dt_tensor_destroy(x);
  dt_mesh_destroy(m);
}

TEST(History, BadArgumentsAreNamed) {
  size_t need = 0;
  expect_error(dt_mesh_comm_history_json(nullptr, nullptr, 0, &need), DT_ERR_INVALID_ARGUMENT, {"mesh"});
  dt_mesh* m = nullptr;
  OK(dt_mesh_create("local", 1, nullptr, &m));
  expect_error(dt_mesh_comm_history_json(m, nullptr, 0, nullptr), DT_ERR_INVALID_ARGUMENT, {"needed"});
  expect_error(dt_mesh_comm_history_json(m, nullptr, 4, &need), DT_ERR_INVALID_ARGUMENT, {"buf is NULL"});
  dt_mesh_destroy(m);
}

}  // namespace
