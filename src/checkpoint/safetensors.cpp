#include "strata/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <optional>

#include "checkpoint/checksum.h"
#include "checkpoint/posix_file.h"
#include "checkpoint/safetensors_detail.h"
#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/tensor/factory.h"

// The data section is the tensors' bytes as they lie in memory; the format says little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace strata::checkpoint {
namespace {

using nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";
// The reference implementation refuses larger headers; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::Float32;
  if (name == "F64") return DType::Float64;
  if (name == "BF16") return DType::BFloat16;
  if (name == "F16") return DType::Float16;
  if (name == "I32") return DType::Int32;
  if (name == "I64") return DType::Int64;
  if (name == "BOOL") return DType::Bool;
  return std::nullopt;
}

// A non-negative JSON integer, or an error naming the file, tensor and field.
uint64_t json_u64(const json& v, const std::string& path, const std::string& name, const char* field) {
  STRATA_CHECK(v.is_number_unsigned(), "safetensors '", path, "': tensor '", name, "': ", field,
               " must hold non-negative integers, found ", v.dump());
  return v.get<uint64_t>();
}

struct HeaderEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

HeaderEntry parse_entry(const std::string& path, const std::string& name, const json& info) {
  const std::string where = "safetensors '" + path + "': tensor '" + name + "'";
  STRATA_CHECK(info.is_object(), where, ": expected an object with dtype, shape, data_offsets, found ", info.dump());
  auto field = [&](const char* key) -> const json& {
    auto it = info.find(key);
    STRATA_CHECK(it != info.end(), where, ": missing field \"", key, "\"");
    return *it;
  };
  HeaderEntry e{name, DType::Float32, {}, 0, 0};

  const json& dtype = field("dtype");
  STRATA_CHECK(dtype.is_string(), where, ": field \"dtype\" must be a string, found ", dtype.dump());
  std::optional<DType> dt = dtype_from_name(dtype.get<std::string>());
  STRATA_CHECK(dt.has_value(), where, ": unknown dtype \"", dtype.get<std::string>(),
               "\" (strata reads F32, F64, BF16, F16, I32, I64, BOOL)");
  e.dtype = *dt;

  const json& shape = field("shape");
  STRATA_CHECK(shape.is_array(), where, ": field \"shape\" must be an array, found ", shape.dump());
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : shape) {
    const uint64_t n = json_u64(d, path, name, "\"shape\"");
    STRATA_CHECK(n <= static_cast<uint64_t>(INT64_MAX), where, ": shape dimension ", n, " is too large");
    overflow |= __builtin_mul_overflow(numel, n, &numel);
    e.shape.push_back(static_cast<int64_t>(n));
  }

  const json& offsets = field("data_offsets");
  STRATA_CHECK(offsets.is_array() && offsets.size() == 2, where,
               ": field \"data_offsets\" must be [begin, end], found ", offsets.dump());
  e.begin = json_u64(offsets[0], path, name, "\"data_offsets\"");
  e.end = json_u64(offsets[1], path, name, "\"data_offsets\"");
  STRATA_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end, "] end before they begin");

  uint64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes);
  STRATA_CHECK(!overflow && nbytes == e.end - e.begin, where, ": shape ", e.shape, " of ", dtype.get<std::string>(),
               " needs ", overflow ? std::string("more than 2^64") : std::to_string(nbytes),
               " bytes but data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin);
  return e;
}

Metadata parse_metadata(const std::string& path, const json& meta) {
  Metadata out;
  if (meta.is_null()) return out;
  STRATA_CHECK(meta.is_object(), "safetensors '", path, "': __metadata__ must be an object of strings, found ",
               meta.dump());
  for (const auto& [key, value] : meta.items()) {
    STRATA_CHECK(value.is_string(), "safetensors '", path, "': __metadata__[\"", key, "\"] must be a string, found ",
                 value.dump());
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// Every byte of the data section belongs to exactly one tensor, as the reference reader
// requires: sorted by offset, each tensor starts where the previous one ended.
void check_layout(const std::string& path, std::vector<HeaderEntry>& entries, uint64_t data_bytes) {
  std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const HeaderEntry* previous = nullptr;
  for (const HeaderEntry& e : entries) {
    STRATA_CHECK(e.end <= data_bytes, "safetensors '", path, "': tensor '", e.name, "': data_offsets [", e.begin, ", ",
                 e.end, "] lie beyond the data section, which is ", data_bytes, " bytes (file truncated?)");
    if (e.begin < expected) {
      STRATA_FAIL("safetensors '", path, "': tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
                  "] overlap tensor '", previous->name, "' at [", previous->begin, ", ", previous->end, "]");
    }
    STRATA_CHECK(e.begin == expected, "safetensors '", path, "': tensor '", e.name, "': data_offsets [", e.begin, ", ",
                 e.end, "] leave a gap: the previous tensor ends at byte ", expected);
    expected = e.end;
    previous = &e;
  }
  STRATA_CHECK(expected == data_bytes, "safetensors '", path, "': data section is ", data_bytes,
               " bytes but the tensors cover ", expected, " (", data_bytes - expected, " trailing bytes)");
}

// A bool tensor holds 0 or 1 in each byte; any other byte would be an invalid C++ bool.
void check_bool_bytes(const std::string& path, const std::string& name, const Tensor& t) {
  const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    STRATA_CHECK(bytes[i] <= 1, "safetensors '", path, "': BOOL tensor '", name, "' holds byte ",
                 static_cast<int>(bytes[i]), " at element ", i, " (expected 0 or 1)");
  }
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
  }
  STRATA_FAIL("safetensors: dtype ", static_cast<int>(dtype), " has no safetensors name");
}

DType parse_safetensors_dtype(std::string_view name) {
  std::optional<DType> dt = dtype_from_name(name);
  STRATA_CHECK(dt.has_value(), "unknown safetensors dtype \"", name,
               "\" (strata reads F32, F64, BF16, F16, I32, I64, BOOL)");
  return *dt;
}

namespace detail {

std::vector<SafetensorsEntry> plan_safetensors(const StateDict& tensors, const std::string& path) {
  NoGradGuard no_grad;  // contiguous() copies must not record autograd history
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    STRATA_CHECK(name != kMetadataKey, "save_safetensors '", path, "': \"", kMetadataKey,
                 "\" is reserved and cannot name a tensor");
    STRATA_CHECK(t.defined(), "save_safetensors '", path, "': tensor '", name, "' is undefined");
    entries.push_back({name, t.to(Device::cpu()).contiguous(), 0, 0});
  }
  // Larger elements first: each tensor then starts at a multiple of its element size.
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return dtype_size(a.tensor.dtype()) > dtype_size(b.tensor.dtype());
  });
  uint64_t offset = 0;
  for (SafetensorsEntry& e : entries) {
    e.begin = offset;
    offset += e.tensor.nbytes();
    e.end = offset;
  }
  return entries;
}

uint32_t data_crc32(const std::vector<SafetensorsEntry>& entries) {
  uint32_t crc = 0;
  for (const SafetensorsEntry& e : entries) crc = detail::crc32(e.tensor.raw_data(), e.tensor.nbytes(), crc);
  return crc;
}

json safetensors_header(const std::vector<SafetensorsEntry>& entries, const Metadata& metadata) {
  json header = json::object();
  for (const SafetensorsEntry& e : entries) {
    header[e.name] = {{"dtype", safetensors_dtype_name(e.tensor.dtype())},
                      {"shape", e.tensor.shape().vec()},
                      {"data_offsets", {e.begin, e.end}}};
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  return header;
}

std::string dump_json(const json& value, const std::string& path) {
  try {
    return value.dump();
  } catch (const json::exception& ex) {
    STRATA_FAIL("cannot write '", path, "': a tensor name or metadata string is not valid UTF-8 (", ex.what(), ")");
  }
}

SafetensorsWritten write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                                     const json& header) {
  std::string text = dump_json(header, path);
  text.resize((text.size() + 7) / 8 * 8, ' ');  // keeps the data section 8-byte aligned
  const uint64_t n = text.size();
  SafetensorsWritten out{.data_start = 8 + n, .file_bytes = 0, .header_crc32 = detail::crc32(text.data(), text.size())};
  write_file_atomic(path, [&](AtomicFileWriter& f) {
    f.write(&n, sizeof n);  // little-endian host (static_assert above)
    f.write(text);
    for (const SafetensorsEntry& e : entries) f.write(e.tensor.raw_data(), e.tensor.nbytes());
    out.file_bytes = f.bytes_written();
  });
  return out;
}

SafetensorsRead read_safetensors(const std::string& path) {
  ReadOnlyFile file(path);
  const uint64_t size = file.size();
  STRATA_CHECK(size >= 8, "safetensors '", path, "': file is ", size,
               " bytes, shorter than the 8-byte header length (truncated or not a safetensors file)");
  uint64_t n = 0;
  file.read_at(0, &n, sizeof n);
  STRATA_CHECK(n <= size - 8, "safetensors '", path, "': header length ", n, " (first 8 bytes) exceeds the ", size - 8,
               " bytes after it (truncated or not a safetensors file)");
  STRATA_CHECK(n <= kMaxHeaderBytes, "safetensors '", path, "': header length ", n, " exceeds the limit of ",
               kMaxHeaderBytes, " bytes");
  std::string text(n, '\0');
  file.read_at(8, text.data(), n);

  SafetensorsRead out;
  try {
    out.header = json::parse(text);
  } catch (const json::exception& ex) {
    STRATA_FAIL("safetensors '", path, "': header (", n, " bytes) is not valid JSON: ", ex.what());
  }
  STRATA_CHECK(out.header.is_object(), "safetensors '", path, "': header must be a JSON object, found ",
               out.header.type_name());

  std::vector<HeaderEntry> entries;
  for (const auto& [name, info] : out.header.items()) {
    if (name == kMetadataKey) {
      out.file.metadata = parse_metadata(path, info);
    } else {
      entries.push_back(parse_entry(path, name, info));
    }
  }
  const uint64_t data_start = 8 + n;
  check_layout(path, entries, size - data_start);

  // Read in file order so the CRC runs over the data section front to back.
  uint32_t crc = 0;
  for (const HeaderEntry& e : entries) {
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    if (e.end > e.begin) {
      file.read_at(data_start + e.begin, t.raw_data(), e.end - e.begin);
      crc = detail::crc32(t.raw_data(), e.end - e.begin, crc);
      if (e.dtype == DType::Bool) check_bool_bytes(path, e.name, t);
    }
    out.file.tensors.emplace(e.name, std::move(t));
  }
  out.file.data_crc32 = crc;
  return out;
}

}  // namespace detail

void save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  std::vector<detail::SafetensorsEntry> entries = detail::plan_safetensors(tensors, path);
  detail::write_safetensors(path, entries, detail::safetensors_header(entries, metadata));
}

SafetensorsFile load_safetensors(const std::string& path) { return detail::read_safetensors(path).file; }

}  // namespace strata::checkpoint
