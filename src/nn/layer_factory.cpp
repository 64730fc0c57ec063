#include "strata/nn/layer_factory.h"

#include "strata/ops.h"

namespace strata::nn {

std::shared_ptr<Linear> LayerFactory::column(int64_t in, int64_t out, bool bias, InitOptions init, int64_t) {
  return std::make_shared<Linear>(in, out, bias, init);
}

std::shared_ptr<Linear> LayerFactory::row(int64_t in, int64_t out, bool bias, InitOptions init) {
  return std::make_shared<Linear>(in, out, bias, init);
}

std::shared_ptr<Linear> LayerFactory::row_partial(int64_t in, int64_t out, InitOptions init) {
  return std::make_shared<Linear>(in, out, false, init);
}

std::shared_ptr<Embedding> LayerFactory::embedding(int64_t vocab, int64_t dim, InitOptions init) {
  return std::make_shared<Embedding>(vocab, dim, init);
}

std::shared_ptr<Linear> LayerFactory::head(int64_t in, int64_t vocab, InitOptions init) {
  return std::make_shared<Linear>(in, vocab, false, init);
}

Tensor LayerFactory::cross_entropy(const Tensor& logits, const Tensor& targets, int64_t /*vocab*/, int64_t classes) {
  return strata::cross_entropy(logits, targets, /*ignore_index=*/-100, classes);
}

Tensor LayerFactory::gather_logits(const Tensor& logits, int64_t classes) {
  return logits.size(-1) == classes ? logits : logits.narrow(-1, 0, classes);
}

std::shared_ptr<LayerFactory> default_layer_factory() {
  static auto factory = std::make_shared<LayerFactory>();
  return factory;
}

}  // namespace strata::nn
