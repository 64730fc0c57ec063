#include "strata/nn/language_model.h"

#include "strata/core/error.h"

namespace strata::nn {

KVCache LanguageModel::make_cache() const {
  STRATA_CHECK(cache_layers() > 0, "LanguageModel::make_cache: this model keeps no key/value cache (cache_layers() ",
               "is ", cache_layers(), "); override cache_layers() if its forward takes one");
  return KVCache(cache_layers(), context_length());
}

}  // namespace strata::nn
