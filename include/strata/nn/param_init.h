#pragma once
// How a parameter draws its initial values, element by element: each element's value is a
// function of a Philox stream and the element's index in the whole parameter, so a process
// that holds a part of a parameter (a tensor-parallel rank's rows, ZeRO's shard) draws
// exactly its own elements, and a model that holds some of its blocks (a pipeline stage)
// draws those blocks as the whole model does, with no draws skipped or repeated.
#include <cstdint>
#include <optional>
#include <vector>

#include "strata/core/random.h"
#include "strata/core/shape.h"
#include "strata/tensor/tensor.h"

namespace strata::nn {

struct ParamInit {
  enum class Kind {
    Normal,    // normal(0, scale)
    Uniform,   // uniform(-scale, scale), as torch.nn.Linear's default
    Constant,  // every element `scale` (norm weights 1, biases 0)
  };
  Kind kind = Kind::Constant;
  double scale = 0.0;
};

// Where a part's elements sit in the whole parameter: along `dim`, local indices
// [local_start, local_start + length) are the whole's [whole_start, whole_start + length);
// local indices in no run are padding and stay zero. Other dims are whole.
struct PartRun {
  int64_t local_start = 0;
  int64_t whole_start = 0;
  int64_t length = 0;
};
struct PartOfWhole {
  Shape whole;
  int64_t dim = 0;
  std::vector<PartRun> runs;
};

// What Module::init_parameters draws for one parameter.
struct ParamRecipe {
  ParamInit init;
  std::optional<PartOfWhole> part;  // unset: the parameter is whole
};

// Fills `t` (CPU, floating) with `init` drawn from `stream` at each element's index in the
// whole parameter (`part`, or `t` itself). 16-bit tensors are drawn in float32 and rounded,
// so they equal the float32 draw rounded.
void fill_init(Tensor& t, const ParamInit& init, const PhiloxStream& stream, const PartOfWhole* part = nullptr);

}  // namespace strata::nn
