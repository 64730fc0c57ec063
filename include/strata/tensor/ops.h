#pragma once
#include "strata/tensor/ops/compare.h"
#include "strata/tensor/ops/elementwise.h"
#include "strata/tensor/ops/indexing.h"
#include "strata/tensor/ops/linalg.h"
#include "strata/tensor/ops/nn_functional.h"
#include "strata/tensor/ops/reduce.h"
#include "strata/tensor/ops/shape_ops.h"
