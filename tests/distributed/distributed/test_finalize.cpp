// finalize(): safe twice; every later use raises strata::Error.
#include "distributed/dist_test_util.h"

namespace strata {
namespace {

using test::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(DistFinalize, UseAfterFinalizeThrows) {
  auto& world = dist::world();
  std::vector<int> all;
  for (int r = 0; r < world.size(); ++r) all.push_back(r);
  auto kept = world.split(all, "kept");
  Tensor t = ones({4});
  auto pending = kept->all_reduce(t);
  dist::finalize();  // waits for `pending`
  EXPECT_TRUE(pending->is_completed());
  EXPECT_EQ(t.to_vector<double>()[0], world.size());
  dist::finalize();
  EXPECT_FALSE(dist::is_initialized());
  std::string err = error_of([&] { world.all_reduce(t); });
  EXPECT_TRUE(contains(err, "finalized")) << err;
  err = error_of([&] { kept->barrier(); });
  EXPECT_TRUE(contains(err, "finalized")) << err;
  EXPECT_TRUE(contains(err, "'kept'")) << err;
  EXPECT_TRUE(contains(error_of([] { dist::world(); }), "finalized"));
  EXPECT_TRUE(contains(error_of([] { dist::init(); }), "finalized"));
}

}  // namespace
}  // namespace strata
