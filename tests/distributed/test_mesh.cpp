// DeviceMesh over 4 ranks: the sub-groups of a 2x2 mesh and the shape check.
#include "dist_test_util.h"
#include "strata/distributed/device_mesh.h"

namespace strata {
namespace {

using dist::MeshDim;
using test::error_of;

TEST(DistMesh, DataByTensorTwoByTwo) {
  auto& world = dist::world();
  ASSERT_EQ(world.size(), 4);
  dist::DeviceMesh mesh(world, {.pp = 1, .dp = 2, .tp = 2});
  const int me = world.rank();
  EXPECT_EQ(mesh.coord(MeshDim::Tensor), me % 2);
  EXPECT_EQ(mesh.coord(MeshDim::Data), me / 2);
  EXPECT_EQ(mesh.coord(MeshDim::Pipeline), 0);
  EXPECT_EQ(mesh.size(MeshDim::Data), 2);
  auto& tp = mesh.group(MeshDim::Tensor);
  auto& dp = mesh.group(MeshDim::Data);
  // tp innermost: {0,1} and {2,3}; dp: {0,2} and {1,3}.
  EXPECT_EQ(tp.global_ranks(), (std::vector<int>{me / 2 * 2, me / 2 * 2 + 1}));
  EXPECT_EQ(dp.global_ranks(), (std::vector<int>{me % 2, me % 2 + 2}));
  EXPECT_EQ(tp.rank(), me % 2);
  EXPECT_EQ(dp.rank(), me / 2);
  EXPECT_EQ(mesh.group(MeshDim::Pipeline).size(), 1);
  EXPECT_NE(dp.name().find("dp(ranks"), std::string::npos) << dp.name();

  Tensor a = full({5}, me);
  tp.all_reduce(a)->wait();
  EXPECT_EQ(a.to_vector<double>()[0], (me / 2 * 2) * 2 + 1);
  Tensor b = full({5}, me);
  dp.all_reduce(b)->wait();
  EXPECT_EQ(b.to_vector<double>()[4], (me % 2) * 2 + 2);
  // Groups of different dimensions interleaved: issue order is the same on every rank.
  Tensor c = full({3}, 1.0), d = full({3}, 1.0);
  auto w1 = dp.all_reduce(c);
  auto w2 = tp.all_reduce(d);
  auto w3 = mesh.group(MeshDim::Pipeline).all_reduce(c);
  w3->wait();
  w2->wait();
  w1->wait();
  EXPECT_EQ(c.to_vector<double>()[0], 2);
  EXPECT_EQ(d.to_vector<double>()[0], 2);
  // Uneven all_gather inside a sub-group (M = 3 over 2 ranks).
  Tensor out = zeros({3});
  Tensor in = full({tp.chunk_size(3, tp.rank())}, tp.rank() + 1);
  tp.all_gather(out, in)->wait();
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 1, 2}));
  world.barrier()->wait();
}

TEST(DistMesh, PipelineByTensor) {
  auto& world = dist::world();
  dist::DeviceMesh mesh(world, {.pp = 2, .dp = 1, .tp = 2});
  const int me = world.rank();
  EXPECT_EQ(mesh.coord(MeshDim::Pipeline), me / 2);
  auto& pp = mesh.group(MeshDim::Pipeline);
  EXPECT_EQ(pp.global_ranks(), (std::vector<int>{me % 2, me % 2 + 2}));
  // Stage 0 sends activations to stage 1.
  Tensor t = full({4}, me);
  if (pp.rank() == 0) pp.send(t, 1)->wait();
  else pp.recv(t, 0)->wait();
  EXPECT_EQ(t.to_vector<double>()[0], me % 2);
}

TEST(DistMesh, BadShapeNamesShapeAndWorldSize) {
  auto& world = dist::world();
  std::string err = error_of([&] { dist::DeviceMesh(world, {.pp = 1, .dp = 3, .tp = 2}); });
  EXPECT_NE(err.find("pp=1 x dp=3 x tp=2"), std::string::npos) << err;
  EXPECT_NE(err.find("world size 4"), std::string::npos) << err;
  err = error_of([&] { dist::DeviceMesh(world, {.pp = 0, .dp = 4, .tp = 1}); });
  EXPECT_NE(err.find("pp=0"), std::string::npos) << err;
}

}  // namespace
}  // namespace strata
