#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>

namespace strata::dist {

enum class ReduceOp : uint8_t { Sum, Avg, Max, Min, Product };
std::string_view reduce_op_name(ReduceOp op);
std::ostream& operator<<(std::ostream& os, ReduceOp op);

// The collectives and point-to-point ops a ProcessGroup performs (accounting keys). New
// kinds go last: the values are debug signatures' op kinds.
enum class OpType : uint8_t {
  AllReduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  AllToAll,
  Send,
  Recv,
  Barrier,
  AllToAllV
};
std::string_view op_type_name(OpType op);

// Calls and payload bytes per op, counted on the calling rank when the op is issued. Bytes
// are the bytes of this rank's input tensor (all_gather: its contribution; reduce_scatter
// and all_reduce: the whole input; send/recv: the message), so that DDP and ZeRO can assert
// their communication volume. all_to_all_v, whose sizes differ per rank, also counts what
// it receives: bytes = the rows this rank sends (its whole input, its own rows included, as
// all_to_all), received_bytes = the rows it receives (its whole output).
struct OpCounter {
  uint64_t calls = 0;
  uint64_t bytes = 0;
  uint64_t received_bytes = 0;  // all_to_all_v only
};
using CommStats = std::map<OpType, OpCounter>;

inline constexpr std::chrono::milliseconds kDefaultTimeout{std::chrono::minutes(10)};

}  // namespace strata::dist
