// Creating an NCCL group over another (MPI) group: rank 0 makes NCCL's unique id and the
// bootstrap group broadcasts it; every rank joins with ncclCommInitRank on its current GPU.
// The bootstrap group also yields the group's arrival board (distributed/arrivals.h).
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "distributed/backend.h"
#include "distributed/nccl/process_group_nccl.h"
#include "strata/core/error.h"
#include "strata/core/hash.h"
#include "strata/tensor/cuda.h"
#include "strata/tensor/factory.h"

namespace strata::dist::nccl {
namespace {

int64_t host_hash() {
  char host[256] = {};
  (void)gethostname(host, sizeof(host) - 1);
  return static_cast<int64_t>(fnv1a(host) >> 1);  // non-negative as an int64 element
}

}  // namespace

std::unique_ptr<ProcessGroup> make_group(ProcessGroup& bootstrap, const std::string& name) {
  const int device = cuda::current_device();  // throws naming the device without a GPU
  const int rank = bootstrap.rank(), size = bootstrap.size();

  // NCCL allows one rank per GPU; name the ranks that share one rather than let
  // ncclCommInitRank fail with "duplicate GPU".
  Tensor mine = from_vector<int64_t>({host_hash(), device}, {2});
  Tensor all = empty({2 * static_cast<int64_t>(size)}, {.dtype = DType::Int64});
  bootstrap.all_gather(all, mine)->wait();
  std::vector<int64_t> v = all.to_vector<int64_t>();
  std::map<std::pair<int64_t, int64_t>, int> first;
  for (int r = 0; r < size; ++r) {
    auto key = std::make_pair(v[2 * static_cast<size_t>(r)], v[2 * static_cast<size_t>(r) + 1]);
    auto [it, fresh] = first.emplace(key, r);
    STRATA_CHECK(fresh, "new_nccl_group over group '", bootstrap.name(), "': ranks ", it->second, " and ", r,
                 " both use cuda:", key.second,
                 " on the same host; NCCL allows one rank per GPU (start one rank per "
                 "GPU, or use the MPI group, which stages CUDA tensors through the host)");
  }

  // Element 0: 1 when rank 0 made the id, so that the others fail instead of waiting.
  constexpr int64_t kIdWords = (sizeof(ncclUniqueId) + 7) / 8;
  Tensor packet = zeros({1 + kIdWords}, {.dtype = DType::Int64});
  ncclUniqueId id{};
  std::string rank0_error;
  if (rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc == ncclSuccess) {
      packet.data<int64_t>()[0] = 1;
      std::memcpy(packet.data<int64_t>() + 1, &id, sizeof(id));
    } else {
      rank0_error = ncclGetErrorString(rc);
    }
  }
  bootstrap.broadcast(packet, 0)->wait();
  STRATA_CHECK(packet.data<int64_t>()[0] == 1, "new_nccl_group over group '", bootstrap.name(),
               "': rank 0 could not create NCCL's unique id", rank0_error.empty() ? "" : ": ", rank0_error);
  std::memcpy(&id, packet.data<int64_t>() + 1, sizeof(id));

  // The side channel that names the ranks missing from an expired op (distributed/arrivals.h);
  // null over a non-MPI group.
  const std::string group_name = name.empty() ? "nccl(" + bootstrap.name() + ")" : name;
  std::unique_ptr<detail::ArrivalBoard> arrivals = detail::make_arrival_board(bootstrap, group_name);

  // Non-blocking, against the bootstrap group's timeout: every rank got here (the
  // all_gather above), so a creation that does not finish means NCCL cannot connect them.
  ncclComm_t comm = nullptr;
  {
    cuda_detail::DeviceGuard guard(device);
    ncclConfig_t config = nonblocking_config();
    const std::string what = "creating NCCL group '" + group_name + "' (rank " + std::to_string(rank) + " of " +
                             std::to_string(size) + ", cuda:" + std::to_string(device) + ")";
    try {
      STRATA_NCCL(ncclCommInitRankConfig(&comm, size, id, rank, &config));
      await_comm(comm, Clock::now() + bootstrap.timeout(), what);
    } catch (const std::exception& e) {
      if (comm != nullptr) (void)ncclCommAbort(comm);
      STRATA_FAIL(e.what(), " (NCCL could not connect the ranks: check NCCL_SOCKET_IFNAME and NCCL_DEBUG=INFO)");
    }
  }
  auto group = std::make_unique<ProcessGroupNCCL>(comm, rank, size, device, group_name, bootstrap.global_ranks(),
                                                  std::move(arrivals));
  group->set_timeout(bootstrap.timeout());
  return group;
}

}  // namespace strata::dist::nccl

namespace strata::dist::detail {
std::unique_ptr<ProcessGroup> make_nccl_group(ProcessGroup& bootstrap, const std::string& name) {
  return nccl::make_group(bootstrap, name);
}
}  // namespace strata::dist::detail
