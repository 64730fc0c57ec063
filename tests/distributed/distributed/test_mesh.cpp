// DeviceMesh over 4 ranks: the sub-groups of a 2x2 mesh and the shape check.
#include "distributed/dist_test_util.h"
#include "strata/distributed/device_mesh.h"
#include "strata/ops/elementwise.h"

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

// dp=2 x cp=2: the context ranks of a sequence are neighbours; DataContext holds all four.
TEST(DistMesh, DataByContextTwoByTwo) {
  auto& world = dist::world();
  dist::DeviceMesh mesh(world, {.dp = 2, .cp = 2});
  const int me = world.rank();
  EXPECT_EQ(mesh.coord(MeshDim::Context), me % 2);
  EXPECT_EQ(mesh.coord(MeshDim::Data), me / 2);
  EXPECT_EQ(mesh.coord(MeshDim::DataContext), me);
  EXPECT_EQ(mesh.size(MeshDim::DataContext), 4);
  EXPECT_EQ(mesh.group(MeshDim::Context).global_ranks(), (std::vector<int>{me / 2 * 2, me / 2 * 2 + 1}));
  EXPECT_EQ(mesh.group(MeshDim::Data).global_ranks(), (std::vector<int>{me % 2, me % 2 + 2}));
  auto& dpcp = mesh.group(MeshDim::DataContext);
  EXPECT_EQ(dpcp.global_ranks(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(dpcp.name().find("dp_cp(ranks"), std::string::npos) << dpcp.name();
  Tensor a = full({2}, me);
  dpcp.all_reduce(a)->wait();
  EXPECT_EQ(a.to_vector<double>()[0], 6);
}

// cp=2 x tp=2: tp innermost, cp next; with dp = 1 the DataContext group is the context group.
TEST(DistMesh, ContextByTensor) {
  auto& world = dist::world();
  dist::DeviceMesh mesh(world, {.tp = 2, .cp = 2});
  const int me = world.rank();
  EXPECT_EQ(mesh.coord(MeshDim::Tensor), me % 2);
  EXPECT_EQ(mesh.coord(MeshDim::Context), me / 2);
  EXPECT_EQ(mesh.group(MeshDim::Context).global_ranks(), (std::vector<int>{me % 2, me % 2 + 2}));
  EXPECT_EQ(&mesh.group(MeshDim::DataContext), &mesh.group(MeshDim::Context));
  test::expect_contains(error_of([&] { dist::DeviceMesh bad(world, {.dp = 2, .tp = 1, .cp = 3}); }),
                        "pp=1 x dp=2 x tp=1 x cp=3 (product 6) does not match the world size 4");
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

// Regression: destroying a mesh right after reduce_scatter / all_gather on its data group
// (the shared-memory path: the op completes without an MPI call, so the peers' "entered op"
// notices on the group's side channel may not have arrived yet) freed the side channel's
// communicator under those notices; Open MPI handed them to the next communicator given
// its context id, and the next mesh's splits crashed in MPI_Comm_dup (mca_pml_ob1_add_comm).
// No barrier between the meshes on purpose: a barrier's progress would let the notices in.
TEST(DistMesh, RebuiltAfterShardedCollectivesOnItsGroups) {
  auto& world = dist::world();
  const int me = world.rank();
  const dist::MeshShape shapes[] = {
      {.pp = 2, .dp = 2, .tp = 1}, {.pp = 1, .dp = 2, .tp = 2}, {.pp = 1, .dp = 4, .tp = 1}};
  for (int round = 0; round < 9; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    dist::DeviceMesh mesh(world, shapes[round % 3]);
    auto& dp = mesh.group(MeshDim::Data);
    const int r = dp.rank();
    const int64_t m = 1000 + round;  // uneven chunks in some rounds
    double members = 0;              // sum over the group of (world rank + 1)
    for (int g : dp.global_ranks()) members += g + 1;

    // reduce_scatter: in[i] = (world rank + 1) + i, so chunk element i sums to members + n * i.
    Tensor in = arange(0, m, 1, {.dtype = DType::Float32}) + static_cast<double>(me + 1);
    Tensor out = zeros({dp.chunk_size(m, r)});
    dp.reduce_scatter(out, in)->wait();
    const std::vector<double> got = out.to_vector<double>();
    const int64_t begin = dp.chunk_begin(m, r);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], members + dp.size() * static_cast<double>(begin + static_cast<int64_t>(i))) << "element " << i;

    // all_gather: chunk q of the result is group rank q's value.
    Tensor mine = full({dp.chunk_size(m, r)}, r + 1 + round);
    Tensor all = zeros({m});
    dp.all_gather(all, mine)->wait();
    const std::vector<double> gathered = all.to_vector<double>();
    for (int q = 0; q < dp.size(); ++q)
      for (int64_t i = dp.chunk_begin(m, q); i < dp.chunk_begin(m, q) + dp.chunk_size(m, q); ++i)
        ASSERT_EQ(gathered[static_cast<size_t>(i)], q + 1 + round) << "element " << i;
    // The other groups too, when they have peers (their notices reach the same state).
    auto& tp = mesh.group(MeshDim::Tensor);
    if (tp.size() > 1) {
      Tensor t = full({tp.chunk_size(64, tp.rank())}, 1.0);
      Tensor u = zeros({64});
      tp.all_gather(u, t)->wait();
      ASSERT_EQ(u.to_vector<double>()[63], 1.0);
    }
  }
  dist::DeviceMesh last(world, {.pp = 1, .dp = 4, .tp = 1});
  Tensor x = full({3}, me);
  last.group(MeshDim::Data).all_reduce(x)->wait();
  EXPECT_EQ(x.to_vector<double>()[0], 0 + 1 + 2 + 3);
}

// dp=2 x cp=2 with ep=2: the expert groups are consecutive DataContext ranks {0,1} and {2,3};
// the expert-data groups hold the same expert coordinate, {0,2} and {1,3}.
TEST(DistMesh, ExpertGroupsCarvedOutOfDataContext) {
  auto& world = dist::world();
  dist::DeviceMesh mesh(world, {.dp = 2, .cp = 2, .ep = 2});
  const int me = world.rank();
  EXPECT_EQ(mesh.coord(MeshDim::Expert), me % 2);
  EXPECT_EQ(mesh.coord(MeshDim::ExpertData), me / 2);
  EXPECT_EQ(mesh.size(MeshDim::Expert), 2);
  EXPECT_EQ(mesh.size(MeshDim::ExpertData), 2);
  auto& ep = mesh.group(MeshDim::Expert);
  auto& edp = mesh.group(MeshDim::ExpertData);
  EXPECT_EQ(ep.global_ranks(), (std::vector<int>{me / 2 * 2, me / 2 * 2 + 1}));
  EXPECT_EQ(edp.global_ranks(), (std::vector<int>{me % 2, me % 2 + 2}));
  EXPECT_EQ(ep.rank(), me % 2);
  EXPECT_NE(ep.name().find("ep(ranks"), std::string::npos) << ep.name();
  Tensor a = full({2}, me);
  edp.all_reduce(a)->wait();
  EXPECT_EQ(a.to_vector<double>()[0], (me % 2) * 2 + 2);
  // ep = dp: one expert group over the data ranks, expert-data groups of one rank.
  dist::DeviceMesh wide(world, {.dp = 4, .ep = 4});
  EXPECT_EQ(wide.group(MeshDim::Expert).global_ranks(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(wide.group(MeshDim::ExpertData).size(), 1);
  // ep = 1: no expert group; the expert-data group is the data group.
  dist::DeviceMesh plain(world, {.dp = 4});
  EXPECT_EQ(&plain.group(MeshDim::ExpertData), &plain.group(MeshDim::Data));
  test::expect_contains(error_of([&] { plain.group(MeshDim::Expert); }), "ep=1");
}

TEST(DistMesh, BadShapeNamesShapeAndWorldSize) {
  auto& world = dist::world();
  std::string err = error_of([&] { dist::DeviceMesh(world, {.pp = 1, .dp = 3, .tp = 2}); });
  EXPECT_NE(err.find("pp=1 x dp=3 x tp=2"), std::string::npos) << err;
  EXPECT_NE(err.find("world size 4"), std::string::npos) << err;
  err = error_of([&] { dist::DeviceMesh(world, {.pp = 0, .dp = 4, .tp = 1}); });
  EXPECT_NE(err.find("pp=0"), std::string::npos) << err;
  // An ep that does not divide dp x cp: rejected before any split.
  err = error_of([&] { dist::DeviceMesh(world, {.dp = 4, .ep = 3}); });
  test::expect_contains(err, "ep=3 must divide dp x cp = 4 x 1");
}

}  // namespace
}  // namespace strata
