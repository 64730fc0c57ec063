#pragma once
// Moved to cpu/dtype_dispatch.h (host dtype switches). Kept so that src/optim and
// src/parallel/zero.cpp, whose CPU loops include it by this name, build unchanged; new
// code includes cpu/dtype_dispatch.h.
#include "cpu/dtype_dispatch.h"
