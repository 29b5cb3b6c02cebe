#pragma once
// CRC-32C (Castagnoli), from Boost.CRC: the checksum of checkpoint data and of TFRecord framing
// (summaries written, data sets read).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace cohort {

/// A running CRC-32C over bytes fed in pieces. Not thread-safe; cheap to make.
class Crc32c {
 public:
  Crc32c();
  ~Crc32c();
  Crc32c(const Crc32c&) = delete;
  Crc32c& operator=(const Crc32c&) = delete;

  void update(std::span<const std::byte> bytes);
  void update(const void* data, std::size_t size) {
    update({static_cast<const std::byte*>(data), size});
  }
  /// The checksum of everything fed so far.
  std::uint32_t value() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The CRC-32C of `bytes`, the checksum Cohort stores as "crc32c". Pure; thread-safe.
std::uint32_t crc32c(std::span<const std::byte> bytes);

/// TFRecord's masked CRC-32C of `bytes` (the framing of event files and of TFRecord data sets):
/// ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC stored in the data it covers does not
/// checksum to a fixed value. Pure; thread-safe.
std::uint32_t masked_crc32c(std::span<const std::byte> bytes);

}  // namespace cohort
