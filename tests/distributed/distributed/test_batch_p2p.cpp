// ProcessGroup::batch_send_recv over MPI (CPU tensors): every rank sends before it receives,
// which only works because the ops of a batch progress together.
#include "distributed/dist_test_util.h"

namespace strata {
namespace {

TEST(DistBatchP2P, RingExchangeSendsFirst) {
  auto& w = dist::world();
  const int n = w.size(), r = w.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  w.reset_stats();
  // Large enough that MPI cannot buffer the sends eagerly.
  const int64_t k = 1 << 20;
  Tensor mine = full({k}, r + 1);
  Tensor got = zeros({k});
  std::vector<dist::P2POp> ops{dist::P2POp::send(mine, next), dist::P2POp::recv(got, prev)};
  w.batch_send_recv(ops)->synchronize();
  EXPECT_EQ(got.to_vector<float>()[static_cast<size_t>(k - 1)], static_cast<float>(prev + 1));
  dist::CommStats s = w.stats();
  EXPECT_EQ(s[dist::OpType::Send].calls, 1u);
  EXPECT_EQ(s[dist::OpType::Recv].calls, 1u);
  EXPECT_EQ(s[dist::OpType::Send].bytes, static_cast<uint64_t>(4 * k));
}

TEST(DistBatchP2P, BadPeerIsNamed) {
  auto& w = dist::world();
  Tensor t = zeros({2});
  std::vector<dist::P2POp> ops{dist::P2POp::recv(t, w.size())};
  std::string err = test::error_of([&] { w.batch_send_recv(ops); });
  EXPECT_NE(err.find("out of range"), std::string::npos) << err;
}

}  // namespace
}  // namespace strata
