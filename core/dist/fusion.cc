#include "cohort/core/dist/fusion.h"

#include <algorithm>
#include <cstring>

#include "cohort/core/base/bfloat16.h"
#include "cohort/core/base/error.h"
#include "cohort/core/dist/node_sum.h"

namespace cohort {
namespace {

std::size_t elements_per_piece(std::int64_t fusion_bytes, std::size_t element = sizeof(float)) {
  if (fusion_bytes < static_cast<std::int64_t>(element))
    throw InvalidArgument("allreduce: fusion buffer of " + std::to_string(fusion_bytes) +
                          " bytes cannot hold one value");
  return static_cast<std::size_t>(fusion_bytes) / element;
}

}  // namespace

void allreduce_fused(const mpi::Comm& comm, std::span<float> data, std::int64_t fusion_bytes) {
  const std::size_t piece = elements_per_piece(fusion_bytes);
  for (std::size_t first = 0; first < data.size(); first += piece)
    comm.allreduce(data.subspan(first, std::min(piece, data.size() - first)));
}

void round_with_feedback(std::span<const float> data, std::span<float> residual,
                         std::span<std::uint16_t> wire) {
  const float* x = data.data();
  float* r = residual.data();
  std::uint16_t* w = wire.data();
  for (std::size_t i = 0; i < data.size(); ++i) {
    const float value = x[i] + r[i];
    w[i] = bf16::from_float(value);
    r[i] = value - bf16::to_float(w[i]);
  }
}

std::int64_t allreduce_fused_bf16(const mpi::Comm& comm, std::span<float> data,
                                  std::span<float> residual, std::vector<std::uint16_t>& wire,
                                  std::int64_t fusion_bytes) {
  if (residual.size() != data.size())
    throw InvalidArgument("allreduce: " + std::to_string(residual.size()) +
                          " residuals for " + std::to_string(data.size()) + " gradients");
  const std::size_t piece = std::min(elements_per_piece(fusion_bytes, sizeof(std::uint16_t)),
                                     std::max<std::size_t>(data.size(), 1));
  if (wire.size() < piece) wire.resize(piece);
  std::int64_t bytes = 0;
  for (std::size_t first = 0; first < data.size(); first += piece) {
    const std::size_t n = std::min(piece, data.size() - first);
    const std::span<std::uint16_t> w(wire.data(), n);
    round_with_feedback(data.subspan(first, n), residual.subspan(first, n), w);
    comm.allreduce_bf16(w);
    bf16::to_float(w, data.subspan(first, n));
    bytes += static_cast<std::int64_t>(n * sizeof(std::uint16_t));
  }
  return bytes;
}

TensorFusion::TensorFusion(const mpi::Comm& comm, std::int64_t fusion_bytes, bool shared_memory)
    : comm_(comm.dup()), fusion_bytes_(fusion_bytes), try_shared_(shared_memory) {
  elements_per_piece(fusion_bytes_);  // refuses a buffer that holds no value
}

TensorFusion::~TensorFusion() = default;

void TensorFusion::allreduce(std::span<const std::span<float>> tensors) {
  std::size_t total = 0;
  for (const std::span<float>& t : tensors) total += t.size();
  // No larger than the tensors need: the default fusion buffer is large (64 MiB).
  const std::size_t capacity =
      std::min(elements_per_piece(fusion_bytes_), std::max<std::size_t>(total, 1));
  // Every rank passes the same sizes, so every rank (re)makes the shared buffer alike; where
  // NodeSum cannot serve, every rank keeps to MPI from then on.
  if (try_shared_ && (!shared_ || shared_->input().size() < capacity)) {
    shared_.reset();
    shared_ = NodeSum::make(comm_, capacity);
    try_shared_ = shared_ != nullptr;
  }
  if (shared_) return allreduce_shared(tensors, total);
  if (buffer_.size() < capacity) buffer_.resize(capacity);
  allreduce_with_mpi(tensors);
}

void TensorFusion::allreduce_shared(std::span<const std::span<float>> tensors, std::size_t total) {
  float* input = shared_->input().data();
  for (std::size_t start = 0; start < total;) {
    const std::size_t used = std::min(total - start, shared_->input().size());
    // The stretches of the tensors this buffer holds.
    pieces_.clear();
    for_each_within(tensors, start, start + used,
                    [&](float* x, std::size_t, std::size_t n) { pieces_.emplace_back(x, n); });
    // This rank's slice goes from its tensors into the sum and back without the shared buffer:
    // only the other ranks' slices are copied in and out.
    const auto [first, last] = shared_->slice(used);
    const auto outside = [&](auto&& copy) {
      for_each_within(pieces_, 0, first, copy);
      for_each_within(pieces_, last, used, copy);
    };
    outside([&](float* x, std::size_t at, std::size_t n) {
      std::memcpy(input + at, x, n * sizeof(float));
    });
    const float* sum = shared_->sum(fusion_bytes_, pieces_).data();
    outside([&](float* x, std::size_t at, std::size_t n) {
      std::memcpy(x, sum + at, n * sizeof(float));
    });
    start += used;
  }
}

void TensorFusion::allreduce_with_mpi(std::span<const std::span<float>> tensors) {
  const std::size_t capacity = buffer_.size();
  std::size_t begin = 0;
  while (begin < tensors.size()) {
    if (tensors[begin].size() >= capacity) {  // too big to pack: no copy at all
      allreduce_fused(comm_, tensors[begin], fusion_bytes_);
      ++begin;
      continue;
    }
    std::size_t end = begin, used = 0;
    for (; end < tensors.size() && used + tensors[end].size() <= capacity; ++end) {
      if (!tensors[end].empty())  // an empty span's data() may be null, which memcpy may not take
        std::memcpy(buffer_.data() + used, tensors[end].data(), tensors[end].size_bytes());
      used += tensors[end].size();
    }
    comm_.allreduce(std::span<float>(buffer_.data(), used));
    used = 0;
    for (std::size_t i = begin; i < end; ++i) {
      if (!tensors[i].empty()) std::memcpy(tensors[i].data(), buffer_.data() + used, tensors[i].size_bytes());
      used += tensors[i].size();
    }
    begin = end;
  }
}

}  // namespace cohort
