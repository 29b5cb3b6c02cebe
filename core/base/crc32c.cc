#include "cohort/core/base/crc32c.h"

#include <boost/crc.hpp>

namespace cohort {

struct Crc32c::State {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
};

Crc32c::Crc32c() : state_(std::make_unique<State>()) {}
Crc32c::~Crc32c() = default;

void Crc32c::update(std::span<const std::byte> bytes) {
  state_->crc.process_bytes(bytes.data(), bytes.size());
}

std::uint32_t Crc32c::value() const { return state_->crc.checksum(); }

std::uint32_t crc32c(std::span<const std::byte> bytes) {
  Crc32c crc;
  crc.update(bytes);
  return crc.value();
}

std::uint32_t masked_crc32c(std::span<const std::byte> bytes) {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace cohort
