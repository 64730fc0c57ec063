#include "strata_ckpt/model_family.h"

#include "strata/core/error.h"

namespace strata::ckpt_tool {

const train::ModelFamily& family_of(const checkpoint::Metadata& metadata, const std::string& requested,
                                    const std::string& where) {
  if (!requested.empty()) return train::model_family(requested);
  return train::family_of(metadata, where);
}

const train::ModelFamily& family_of_hf_type(const std::string& model_type, const std::string& where) {
  std::string known;
  for (const std::string& name : train::model_family_names()) {
    const train::ModelFamily& f = train::model_family(name);
    if (f.hf_model_type == model_type) return f;
    known += (known.empty() ? "" : ", ") + f.hf_model_type;
  }
  STRATA_FAIL(where, ": model_type '", model_type, "' is none of the known ones (", known,
              "): pass --format to read it as one of them");
}

}  // namespace strata::ckpt_tool
