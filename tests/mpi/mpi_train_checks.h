// What the MPI training tests check once a run under mpirun is done, written once: the
// losses and gathered weights against single-rank training, every process holding the same
// bits, and rank 0's checkpoint loading on one device with those bits.
#pragma once
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/train_engine.h"
#include "mpi/mpi_test_util.h"
#include "multirank/dp_test_util.h"

namespace dt::comm::mpitest {

// Every parameter's values, in order, as doubles.
inline std::vector<double> flat_weights(nn::GPT& model) {
  std::vector<double> w;
  for (nn::Parameter* q : model.parameters()) {
    const std::vector<double> v = dt::test::to_f64(q->value);
    w.insert(w.end(), v.begin(), v.end());
  }
  return w;
}

// Losses step by step and the weights as a whole within `tol` relative of single-rank
// training; every process holding rank 0's bits; and (dir non-empty) the checkpoint rank 0
// wrote there, loaded into a fresh one-device model of `cfg` with `opts`, holding them too
// at step `steps`. Removes dir afterwards (rank 0, once every rank has read it).
inline void expect_trained_like_one_rank(const std::vector<double>& losses, const std::vector<double>& ref_losses,
                                         const std::vector<double>& w, const std::vector<double>& ref_w, double tol,
                                         const std::string& what, const std::string& dir = "",
                                         const nn::GPTConfig* cfg = nullptr, const engine::TrainOptions* opts = nullptr) {
  ASSERT_EQ(ref_losses.size(), losses.size()) << what;
  for (size_t s = 0; s < losses.size(); ++s)
    EXPECT_NEAR(losses[s], ref_losses[s], tol * std::abs(ref_losses[s])) << what << " step " << s;
  ASSERT_EQ(ref_w.size(), w.size()) << what;
  double d = 0, norm = 0;
  for (size_t i = 0; i < w.size(); ++i) d += (w[i] - ref_w[i]) * (w[i] - ref_w[i]), norm += ref_w[i] * ref_w[i];
  EXPECT_LE(std::sqrt(d / norm), tol) << what;
  std::vector<double> root = w;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(root.data(), w.data(), w.size() * sizeof(double)), 0) << what << ": not rank 0's bits";
  if (dir.empty()) return;
  nn::GPT alone(*cfg);
  optim::AdamW opt(alone.parameters(), dt::test::dp_adamw());
  engine::TrainEngine e(nullptr, alone, opt, *opts);
  e.load(dir);
  EXPECT_EQ(e.step(), static_cast<int64_t>(losses.size())) << what;
  const std::vector<double> loaded = flat_weights(alone);
  EXPECT_EQ(std::memcmp(loaded.data(), w.data(), w.size() * sizeof(double)), 0) << what << ": the checkpoint's";
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace dt::comm::mpitest
