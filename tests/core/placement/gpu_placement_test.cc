// Which GPUs a worker's towers get (core/gpu_placement.h). assign_gpus() is given the number of
// visible devices, so every rule is checked here without a GPU; a build without CUDA refuses
// every GPU spec instead.

#include <doctest/doctest.h>

#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/placement/gpu_placement.h"

using cohort::assign_gpus;
using cohort::DeviceSpec;
using cohort::InvalidArgument;
using cohort::parse_compute_device;

TEST_CASE("parse_compute_device: cpu, gpu and device specs") {
  CHECK(parse_compute_device("cpu").device_type == "CPU");
  CHECK(parse_compute_device("CPU").device_type == "CPU");
  CHECK(parse_compute_device("Gpu").device_type == "GPU");
  CHECK_FALSE(parse_compute_device("cpu").device_index);
  CHECK(parse_compute_device("gpu").device_type == "GPU");
  CHECK_FALSE(parse_compute_device("gpu").device_index);
  const DeviceSpec one = parse_compute_device("/gpu:1");
  CHECK(one.device_type == "GPU");
  CHECK(one.device_index == 1);
  CHECK(parse_compute_device("/device:GPU:3").device_index == 3);
  CHECK_THROWS_WITH_AS(parse_compute_device("/job:ps/task:0/cpu:0"),
                       "device \"/job:ps/task:0/cpu:0\" names a job, replica or task: each worker "
                       "computes on its own devices; give the device alone (cpu, gpu, /gpu:N or /cpu:0)",
                       InvalidArgument);
  CHECK_THROWS_AS(parse_compute_device("/job:worker/task:0/device:GPU:3"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_compute_device(""),
                       "device \"\" names no device type: use cpu, gpu, /gpu:N or /cpu:0",
                       InvalidArgument);
  CHECK_THROWS_AS(parse_compute_device("tpu"), InvalidArgument);
  CHECK_THROWS_AS(parse_compute_device("/gpu:x"), InvalidArgument);
  CHECK(parse_compute_device("/cpu:0").device_type == "CPU");
  CHECK_THROWS_WITH_AS(parse_compute_device("/cpu:3"),
                       "device \"/cpu:3\": a process has one CPU device, /cpu:0 (--threads sets "
                       "its cores)",
                       InvalidArgument);
}

TEST_CASE("assign_gpus: CPU specs compute on the host") {
  CHECK(assign_gpus(parse_compute_device("cpu"), 2, 0, 1, 0).empty());
  CHECK(assign_gpus(parse_compute_device("/cpu:0"), 1, 3, 4, 8).empty());
}

TEST_CASE("assign_gpus: without CUDA every GPU spec is refused") {
  if (cohort::built_with_cuda()) return;
  CHECK(cohort::visible_gpus() == 0);
  CHECK_THROWS_WITH_AS(assign_gpus(parse_compute_device("gpu"), 1, 0, 1, 0),
                       "device /device:GPU:*: this Cohort was built without CUDA (COHORT_WITH_CUDA=OFF)",
                       InvalidArgument);
}

TEST_CASE("assign_gpus: the rules, given the visible device count") {
  if (!cohort::built_with_cuda()) return;
  const DeviceSpec any = parse_compute_device("gpu");
  SUBCASE("node-local rank picks the GPU, one tower each") {
    for (int rank = 0; rank < 4; ++rank) CHECK(assign_gpus(any, 1, rank, 4, 4) == std::vector{rank});
  }
  SUBCASE("several towers take consecutive GPUs") {
    CHECK(assign_gpus(any, 2, 0, 2, 4) == std::vector{0, 1});
    CHECK(assign_gpus(any, 2, 1, 2, 4) == std::vector{2, 3});
    CHECK(assign_gpus(any, 4, 0, 1, 8) == std::vector{0, 1, 2, 3});
  }
  SUBCASE("a process given GPUs of its own (Slurm's binding) uses them, whatever its rank") {
    CHECK(assign_gpus(any, 1, 3, 4, 1, true) == std::vector{0});
    CHECK(assign_gpus(any, 2, 1, 2, 2, true) == std::vector{0, 1});
    CHECK_THROWS_WITH_AS(assign_gpus(any, 2, 0, 4, 1, true),
                         "device /device:GPU:*: 2 towers need 2 GPUs; this process was given 1",
                         InvalidArgument);
  }
  SUBCASE("workers that see the same GPUs are not given the same one") {
    CHECK_THROWS_AS(assign_gpus(any, 1, 0, 2, 1), InvalidArgument);
  }
  SUBCASE("too few GPUs for the node's workers: refused, not shared") {
    CHECK_THROWS_WITH_AS(assign_gpus(any, 1, 0, 3, 2),
                         "device /device:GPU:*: the 3 workers on this node with 1 tower each need "
                         "3 GPUs; the node has 2 (name one, as /gpu:0, to let workers share it)",
                         InvalidArgument);
    CHECK_THROWS_AS(assign_gpus(any, 2, 0, 2, 3), InvalidArgument);
  }
  SUBCASE("an explicit index: towers from there, whatever the local rank") {
    const DeviceSpec one = parse_compute_device("/gpu:1");
    CHECK(assign_gpus(one, 1, 0, 3, 2) == std::vector{1});
    CHECK(assign_gpus(one, 1, 2, 3, 2) == std::vector{1});
    CHECK(assign_gpus(parse_compute_device("/gpu:0"), 2, 0, 1, 2) == std::vector{0, 1});
    CHECK_THROWS_WITH_AS(assign_gpus(one, 2, 0, 1, 2),
                         "device /device:GPU:1 with 2 towers needs GPUs 1..2; this process sees 2 GPUs",
                         InvalidArgument);
  }
  SUBCASE("no device visible") {
    CHECK_THROWS_WITH_AS(assign_gpus(any, 1, 0, 1, 0),
                         "device /device:GPU:*: this process sees no CUDA device", InvalidArgument);
  }
}
