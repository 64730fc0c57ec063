#pragma once
// The conversion text_to_tokens runs: a UTF-8 text file read in fixed-size chunks and written
// as byte-level strata token files (docs/data-format.md, version 1, uint16 tokens, vocab 256)
// as it is read, so that memory does not grow with the file.
#include <cstdint>
#include <string>

namespace strata::text_tokens {

struct StreamRequest {
  std::string input;       // a regular file of UTF-8 text
  std::string output;      // token file of the training part
  std::string val_output;  // token file of the last `val_fraction` of the text; empty: none
  double val_fraction = 0;
};

struct StreamResult {
  uint64_t input_bytes = 0;
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
};

// Refuses an input that is not a regular file (a device such as /dev/zero, a FIFO, a
// directory), is empty or is not UTF-8 (naming the offset of the first bad sequence), and a
// split that leaves a part empty. The output files appear together, atomically, only once
// the whole input has been read and checked: a failure leaves earlier files untouched.
StreamResult stream_byte_tokens(const StreamRequest& request);

}  // namespace strata::text_tokens
