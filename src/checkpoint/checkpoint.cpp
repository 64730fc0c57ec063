#include "strata/checkpoint/checkpoint.h"

#include <cstdio>

#include "checkpoint/checksum.h"
#include "checkpoint/safetensors_detail.h"

namespace strata::checkpoint {
namespace {

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The header checksum covers every name, dtype, shape, offset and metadata value: the
// compact sorted-key JSON of the header with header_crc32 itself left out. nlohmann::json
// keeps object keys sorted, so writer and reader serialise the same text.
uint32_t header_crc32(nlohmann::json header, const std::string& path) {
  auto meta = header.find("__metadata__");
  if (meta != header.end() && meta->is_object()) meta->erase(kCheckpointHeaderCrcKey);
  const std::string text = detail::dump_json(header, path);
  return detail::crc32(text.data(), text.size());
}

const std::string& required(const Metadata& meta, const char* key, const std::string& path) {
  auto it = meta.find(key);
  STRATA_CHECK(it != meta.end(), "checkpoint '", path, "': __metadata__ has no \"", key,
               "\"; not a complete strata checkpoint");
  return it->second;
}

}  // namespace

std::string save_checkpoint(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  for (const char* key : {kCheckpointFormatKey, kCheckpointDataCrcKey, kCheckpointHeaderCrcKey}) {
    STRATA_CHECK(!metadata.contains(key), "save_checkpoint '", path, "': metadata key \"", key,
                 "\" is reserved for the checkpoint format");
  }
  std::vector<detail::SafetensorsEntry> entries = detail::plan_safetensors(tensors, path);
  Metadata meta = metadata;
  meta[kCheckpointFormatKey] = kCheckpointFormat;
  meta[kCheckpointDataCrcKey] = hex32(detail::data_crc32(entries));
  nlohmann::json header = detail::safetensors_header(entries, meta);
  std::string header_crc = hex32(header_crc32(header, path));
  header["__metadata__"][kCheckpointHeaderCrcKey] = header_crc;
  detail::write_safetensors(path, entries, header);
  return header_crc;
}

Checkpoint load_checkpoint(const std::string& path) {
  detail::SafetensorsRead read = detail::read_safetensors(path);
  Metadata& meta = read.file.metadata;

  const std::string& format = required(meta, kCheckpointFormatKey, path);
  STRATA_CHECK(format == kCheckpointFormat, "checkpoint '", path, "': format is \"", format, "\", expected \"",
               kCheckpointFormat, "\"");
  const std::string& header_crc = required(meta, kCheckpointHeaderCrcKey, path);
  const std::string header_found = hex32(header_crc32(read.header, path));
  STRATA_CHECK(header_crc == header_found, "checkpoint '", path, "': header checksum mismatch: expected ", header_crc,
               " (stored), found ", header_found, " (a name, shape or metadata value is corrupted)");
  const std::string& data_crc = required(meta, kCheckpointDataCrcKey, path);
  const std::string data_found = hex32(read.file.data_crc32);
  STRATA_CHECK(data_crc == data_found, "checkpoint '", path, "': data checksum mismatch: expected ", data_crc,
               " (stored in the header), found ", data_found, " (tensor data is corrupted)");

  for (const char* key : {kCheckpointFormatKey, kCheckpointDataCrcKey, kCheckpointHeaderCrcKey}) meta.erase(key);
  return {std::move(read.file.tensors), std::move(meta), header_found};
}

}  // namespace strata::checkpoint
