// Saves checkpoints in a loop as fast as it can, for core_checkpoint_kill_test, which kills it
// with SIGKILL at random points:
//
//   checkpoint_writer_cli DIR
//
// Like a restarted training job, it first restores the newest checkpoint of DIR and continues
// from the step after it. Every value is a function of (step, tensor, index), the same one the
// test checks (checkpoint_kill_test.cc: expected_value), so a restored checkpoint can be verified
// beyond its checksum.

#include <cstdint>
#include <cstdio>
#include <exception>

#include "cohort/core/io/checkpoint.h"

namespace {

float expected_value(std::int64_t step, int tensor, std::int64_t i) {
  // Integers below 2^24 times 0.5: exactly representable, so the comparison is exact.
  return static_cast<float>((step * 7919 + tensor * 104729 + i * 31) % 1000003) * 0.5f;
}

cohort::Checkpoint make(std::int64_t step) {
  cohort::Checkpoint c;
  c.metadata = {{"model", "kill_test"}, {"mode", "async"}};
  const cohort::Shape shapes[] = {{256, 512}, {512}, {256, 512}};
  const char* names[] = {"hidden1/kernel", "hidden1/bias", "optimizer/momentum/hidden1/kernel"};
  for (int t = 0; t < 3; ++t) {
    cohort::CheckpointTensor& tensor = c.tensors.emplace_back();
    tensor.name = names[t];
    tensor.shape = shapes[t];
    tensor.values.resize(static_cast<std::size_t>(cohort::num_elements(tensor.shape)));
    for (std::size_t i = 0; i < tensor.values.size(); ++i)
      tensor.values[i] = expected_value(step, t, static_cast<std::int64_t>(i));
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    cohort::CheckpointManager manager(argv[1], 3);
    std::int64_t step = 0;
    if (auto restored = manager.restore_latest()) step = restored->global_step();
    for (;;) {
      ++step;
      manager.save(step, make(step));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_writer_cli: error: %s\n", e.what());
    return 1;
  }
}
