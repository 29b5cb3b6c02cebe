#include "cohort/core/dist/fusion.h"

#include <algorithm>
#include <cstring>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

std::size_t elements_per_piece(std::int64_t fusion_bytes) {
  if (fusion_bytes < static_cast<std::int64_t>(sizeof(float)))
    throw InvalidArgument("allreduce: fusion buffer of " + std::to_string(fusion_bytes) +
                          " bytes cannot hold one float");
  return static_cast<std::size_t>(fusion_bytes) / sizeof(float);
}

}  // namespace

void allreduce_fused(const mpi::Comm& comm, std::span<float> data, std::int64_t fusion_bytes) {
  const std::size_t piece = elements_per_piece(fusion_bytes);
  for (std::size_t first = 0; first < data.size(); first += piece)
    comm.allreduce(data.subspan(first, std::min(piece, data.size() - first)));
}

void allreduce_fused(const mpi::Comm& comm, std::span<const std::span<float>> tensors,
                     std::int64_t fusion_bytes, std::vector<float>& buffer) {
  const std::size_t capacity = elements_per_piece(fusion_bytes);
  if (buffer.size() < capacity) buffer.resize(capacity);
  std::size_t begin = 0;
  while (begin < tensors.size()) {
    if (tensors[begin].size() >= capacity) {  // too big to pack: no copy at all
      allreduce_fused(comm, tensors[begin], fusion_bytes);
      ++begin;
      continue;
    }
    std::size_t end = begin, used = 0;
    for (; end < tensors.size() && used + tensors[end].size() <= capacity; ++end) {
      std::memcpy(buffer.data() + used, tensors[end].data(), tensors[end].size_bytes());
      used += tensors[end].size();
    }
    comm.allreduce(std::span<float>(buffer.data(), used));
    used = 0;
    for (std::size_t i = begin; i < end; ++i) {
      std::memcpy(tensors[i].data(), buffer.data() + used, tensors[i].size_bytes());
      used += tensors[i].size();
    }
    begin = end;
  }
}

}  // namespace cohort
