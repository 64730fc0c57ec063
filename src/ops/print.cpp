// Readable printing under the process-wide print options (strata/tensor/print_options.h):
// nested brackets, a summary ("...") of each long dimension when the tensor has more than
// `threshold` elements, rows wrapped before `linewidth` columns.
#include <iomanip>
#include <ostream>
#include <sstream>

#include "strata/autograd/node.h"
#include "strata/tensor/print_options.h"
#include "strata/tensor/tensor.h"

namespace strata {
namespace {

class ValuePrinter {
 public:
  ValuePrinter(const Tensor& t, const PrintOptions& options, std::ostream& os)
      : shape_(t.shape()),
        strides_(contiguous_strides(t.shape())),
        values_(t.to_vector<double>()),
        summarize_(t.numel() > options.threshold),
        edge_(options.edgeitems),
        linewidth_(options.linewidth),
        precision_(is_floating(t.dtype()) ? options.precision : 19),
        os_(os) {}

  // The dimension d block whose '[' stands at column `column`.
  void print(size_t d, int64_t base, int64_t column) {
    const int64_t n = shape_[d];
    const bool innermost = d + 1 == shape_.size();
    int64_t col = column + 1;  // after '['
    os_ << '[';
    for (int64_t i = 0; i < n; ++i) {
      const bool skip = summarize_ && n > 2 * edge_ && i == edge_;
      if (innermost) {
        std::string item = skip ? "..." : format(values_[static_cast<size_t>(base + i * strides_[d])]);
        if (skip || i + 1 < n) item += ',';
        col = place(item, i == 0, col, column + 1);
      } else if (skip) {
        os_ << "...,\n" << std::string(static_cast<size_t>(column + 1), ' ');
      } else {
        print(d + 1, base + i * strides_[d], column + 1);
        if (i + 1 < n) os_ << ",\n" << std::string(static_cast<size_t>(column + 1), ' ');
      }
      if (skip) i = n - edge_ - 1;
    }
    os_ << ']';
  }

  std::string format(double v) const {
    std::ostringstream s;
    s << std::setprecision(precision_) << v;
    return s.str();
  }

 private:
  // Writes an item after a space, or on a new line indented to `indent` when it would cross
  // the line width; returns the column after it.
  int64_t place(const std::string& item, bool first, int64_t col, int64_t indent) {
    const auto width = static_cast<int64_t>(item.size());
    if (!first && col + 1 + width > linewidth_) {
      os_ << '\n' << std::string(static_cast<size_t>(indent), ' ');
      col = indent;
    } else if (!first) {
      os_ << ' ';
      ++col;
    }
    os_ << item;
    return col + width;
  }

  const Shape& shape_;
  Strides strides_;
  std::vector<double> values_;
  bool summarize_;
  int64_t edge_, linewidth_;
  int precision_;
  std::ostream& os_;
};

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(";
  ValuePrinter printer(*this, print_options(), os);
  if (dim() == 0) {
    os << printer.format(item());
  } else {
    printer.print(0, 0, 7);
  }
  os << ", shape=" << shape() << ", dtype=" << dtype();
  if (!device().is_cpu()) os << ", device=" << device();
  if (requires_grad()) os << (grad_fn() ? ", grad_fn=" + std::string(grad_fn()->name()) : ", requires_grad");
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace strata
