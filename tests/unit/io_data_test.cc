// Tokenizer round trips, datasets from temp text and u16/u32 token files, the addition task
// and its answer mask, and the sampler: determinism, epoch reshuffle, and the dp split.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "io/dataset.h"
#include "io/sampler.h"
#include "io/tokenizer.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "dtrain_io_" + std::to_string(::getpid()) + "_" + name;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(IoTokenizer, RoundTripsAnyBytesAndSpecials) {
  io::ByteTokenizer tok({"BOS", "EOS", "PAD"});
  EXPECT_EQ(tok.vocab_size(), 259);
  EXPECT_EQ(tok.special("BOS"), 256);
  EXPECT_EQ(tok.special("PAD"), 258);
  std::string text = "héllo, wörld\n";
  text.push_back('\0'), text.push_back(static_cast<char>(0xff));
  std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids.back(), 255);
  EXPECT_EQ(tok.decode(ids), text);
  ids.insert(ids.begin(), tok.special("BOS"));
  ids.push_back(tok.special("EOS"));
  EXPECT_EQ(tok.decode(ids, true), text);
  EXPECT_EQ(tok.decode(ids), "<|BOS|>" + text + "<|EOS|>");
  test::expect_invalid([&] { tok.decode({259}); }, "[0, 259)");
  try {
    tok.special("UNK");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_NOT_FOUND);
  }
}

TEST(IoDataset, TextFileWindows) {
  std::string path = temp_path("text.txt");
  write_bytes(path, "abcdefghij");  // 10 tokens, context 3: windows at 0, 3, 6 (last needs 9 < 10)
  auto d = io::TokenDataset::from_text_file(path, 3);
  EXPECT_EQ(d->size(), 3);
  int32_t in[3], tg[3];
  d->get(2, in, tg);
  EXPECT_EQ(std::vector<int32_t>(in, in + 3), (std::vector<int32_t>{'g', 'h', 'i'}));
  EXPECT_EQ(std::vector<int32_t>(tg, tg + 3), (std::vector<int32_t>{'h', 'i', 'j'}));
  test::expect_invalid([&] { d->get(3, in, tg); }, "index 3");
  std::remove(path.c_str());
}

TEST(IoDataset, U16AndU32TokenFilesAreLittleEndian) {
  std::vector<uint32_t> tokens = {1, 300, 65535, 7, 40000, 2, 9};
  for (int width : {2, 4}) {
    std::string bytes;
    for (uint32_t t : tokens)
      for (int k = 0; k < width; ++k) bytes.push_back(static_cast<char>((t >> (8 * k)) & 0xff));
    std::string path = temp_path("tok" + std::to_string(width) + ".bin");
    write_bytes(path, bytes);
    auto d = io::TokenDataset::from_token_file(path, width, 2);
    EXPECT_EQ(d->num_tokens(), 7);
    EXPECT_EQ(d->size(), 3);
    int32_t in[2], tg[2];
    d->get(1, in, tg);
    EXPECT_EQ(in[0], 65535);
    EXPECT_EQ(in[1], 7);
    EXPECT_EQ(tg[1], 40000);
    // Bad files: a token past the vocab, a size that is not a multiple of the width.
    try {
      io::TokenDataset::from_token_file(path, width, 2, 50000);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_IO);
      EXPECT_NE(std::string(e.what()).find("65535"), std::string::npos) << e.what();
    }
    write_bytes(path, bytes + "x");
    try {
      io::TokenDataset::from_token_file(path, width, 2);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_IO);
    }
    std::remove(path.c_str());
  }
}

TEST(IoAddition, SamplesAreSumsAndOnlyTheAnswerIsTargeted) {
  io::AdditionDataset d(3, 1000, 42);
  EXPECT_EQ(d.context(), 12);
  std::set<std::string> distinct;
  for (int64_t i = 0; i < 200; ++i) {
    std::string s = d.text(i);
    ASSERT_EQ(s.size(), 13u) << s;
    long a = std::stol(s.substr(0, 3)), b = std::stol(s.substr(4, 3)), c = std::stol(s.substr(8, 4));
    EXPECT_EQ(s[3], '+');
    EXPECT_EQ(s[7], '=');
    EXPECT_EQ(s.back(), '\n');
    EXPECT_EQ(a + b, c) << s;
    distinct.insert(s);
    EXPECT_EQ(s, io::AdditionDataset(3, 1000, 42).text(i));  // deterministic from (seed, i)
  }
  EXPECT_GT(distinct.size(), 190u);
  EXPECT_NE(d.text(0), io::AdditionDataset(3, 1000, 43).text(0));
  int32_t in[12], tg[12];
  d.get(5, in, tg);
  std::string s = d.text(5);
  for (int k = 0; k < 12; ++k) {
    EXPECT_EQ(in[k], static_cast<unsigned char>(s[k]));
    // Answer targets: the 4 sum digits and the newline (positions 7..11 predict s[8..12]).
    EXPECT_EQ(tg[k], k >= 7 ? static_cast<unsigned char>(s[k + 1]) : -100) << k;
  }
  EXPECT_EQ(d.answer_begin(), 7);
  // Exact match over a batch of two: predictions equal to the targets where targeted count,
  // whatever they are elsewhere; one wrong answer digit makes the row a miss.
  Tensor target = Tensor::zeros({2, 12}, DType::I32), pred = Tensor::zeros({2, 12}, DType::I32);
  d.get(5, pred.data<int32_t>(), target.data<int32_t>());
  d.get(6, pred.data<int32_t>() + 12, target.data<int32_t>() + 12);
  std::copy(target.data<int32_t>() + 7, target.data<int32_t>() + 24, pred.data<int32_t>() + 7);
  EXPECT_EQ(io::exact_matches(target, pred, d.ignore_index()), 2);
  pred.data<int32_t>()[12 + 9] ^= 1;
  EXPECT_EQ(io::exact_matches(target, pred, d.ignore_index()), 1);
}

std::shared_ptr<io::TokenDataset> counting(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n + 1));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(i);
  return io::TokenDataset::from_tokens(t, 1);  // example i is input [i], target [i + 1]
}

TEST(IoSampler, DeterministicAndReshuffledPerEpoch) {
  auto d = counting(50);
  io::SamplerOptions o;
  o.batch = 5, o.seed = 7;
  io::Sampler a(d, o), b(d, o);
  EXPECT_EQ(a.batches_per_epoch(), 10);
  EXPECT_EQ(a.rank_indices(0), b.rank_indices(0));
  EXPECT_NE(a.rank_indices(0), a.rank_indices(1));
  std::vector<int64_t> e0 = a.rank_indices(0), sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);  // a permutation
  o.seed = 8;
  EXPECT_NE(io::Sampler(d, o).rank_indices(0), e0);
  // Batches are the epoch order's examples, [batch, context] inputs and targets.
  Tensor in, tg;
  a.batch(0, 1, in, tg);
  EXPECT_EQ(in.shape(), (Shape{5, 1}));
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(in.data<int32_t>()[r], e0[5 + r]);
    EXPECT_EQ(tg.data<int32_t>()[r], e0[5 + r] + 1);
  }
  // The cursor walks the same batches and rolls into epoch 1; seek() resumes.
  for (int k = 0; k < 11; ++k) b.next(in, tg);
  EXPECT_EQ(b.epoch(), 1);
  EXPECT_EQ(b.position(), 1);
  EXPECT_EQ(in.data<int32_t>()[0], a.rank_indices(1)[0]);
  b.seek(0, 1);
  b.next(in, tg);
  EXPECT_EQ(in.data<int32_t>()[0], e0[5]);
  o.shuffle = false;
  EXPECT_EQ(io::Sampler(d, o).rank_indices(3)[4], 4);
}

// 23 examples over 4 ranks: each rank gets floor(23 / 4) = 5, disjoint; the 3 dropped
// differ between epochs, and over epochs every example is seen.
TEST(IoSampler, DpSplitIsDisjointEqualAndCovering) {
  auto d = counting(23);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> all;
    for (int r = 0; r < 4; ++r) {
      io::SamplerOptions o;
      o.batch = 2, o.seed = 3, o.rank = r, o.world = 4;
      io::Sampler s(d, o);
      EXPECT_EQ(s.examples_per_rank(), 5);
      EXPECT_EQ(s.batches_per_epoch(), 2);
      for (int64_t i : s.rank_indices(epoch)) EXPECT_TRUE(all.insert(i).second) << "example " << i << " twice";
    }
    EXPECT_EQ(all.size(), 20u);
  }
  std::set<int64_t> seen;
  for (int64_t epoch = 0; epoch < 20; ++epoch)
    for (int r = 0; r < 4; ++r) {
      io::SamplerOptions o;
      o.seed = 3, o.rank = r, o.world = 4;
      for (int64_t i : io::Sampler(d, o).rank_indices(epoch)) seen.insert(i);
    }
  EXPECT_EQ(seen.size(), 23u);
  // Without shuffling, a divisible set is covered exactly in one epoch.
  auto d24 = counting(24);
  std::set<int64_t> cover;
  for (int r = 0; r < 4; ++r) {
    io::SamplerOptions o;
    o.shuffle = false, o.rank = r, o.world = 4;
    for (int64_t i : io::Sampler(d24, o).rank_indices(0)) cover.insert(i);
  }
  EXPECT_EQ(cover.size(), 24u);
  io::SamplerOptions bad;
  bad.rank = 4, bad.world = 4;
  test::expect_invalid([&] { io::Sampler(d, bad); }, "rank 4 of world 4");
}

}  // namespace
}  // namespace dt
