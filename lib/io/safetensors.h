// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length
// N, N bytes of JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {string: string}}, then the data; offsets are relative to the data start.
// Writing pads the header with spaces so the data starts 8-byte aligned, and lays tensors
// out by descending element size with no holes, so each starts aligned to its element.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/file_util.h"

namespace dt::io {

struct StEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

struct StHeader {
  std::vector<StEntry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data section (8 + N)
  const StEntry* find(const std::string& name) const;
};

const char* st_dtype_name(DType t);  // "F32", "BF16", "F16", "I32", "I64"

// The bytes of the file before the data (length + padded header), and each entry's
// offsets filled in, for `tensors` in the given order of names.
std::string st_encode_header(std::vector<StEntry>& entries, const std::map<std::string, std::string>& metadata);

// Parses and validates the header of a file of `file_size` bytes whose first bytes (at
// least the 8-byte length and the header it announces) are at `file`. Every problem is DT_ERR_IO naming `path`,
// the tensor and what is wrong: the length overflowing, past the end of file or over the
// header limit; JSON that does not parse, nests too deep, repeats a name or holds too many
// values (json_limits.h); an unknown dtype, a bad shape, offsets reversed, past the end,
// not matching shape x dtype size; and the layout: the tensors must tile the data section
// exactly, from byte 0 to its end, with no overlap, no gap and no bytes after the last.
StHeader st_parse_header(const std::string& path, const unsigned char* file, uint64_t file_size);
// The same for an open file: reads only the length and the header (bounded as above).
StHeader st_read_header(const ReadOnlyFile& file);

}  // namespace dt::io
