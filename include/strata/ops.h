#pragma once
#include "strata/ops/compare.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/indexing.h"
#include "strata/ops/linalg.h"
#include "strata/ops/nn_functional.h"
#include "strata/ops/reduce.h"
#include "strata/ops/shape_ops.h"
