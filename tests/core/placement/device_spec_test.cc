#include "cohort/core/placement/device_spec.h"

#include <doctest/doctest.h>

#include <string>

#include "cohort/core/base/error.h"

using cohort::DeviceSpec;

namespace {

std::string error_of(const std::string& text) {
  try {
    DeviceSpec::parse(text);
  } catch (const cohort::InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a full device string parses into every field") {
  const DeviceSpec s = DeviceSpec::parse("/job:worker/replica:0/task:1/device:CPU:0");
  CHECK(s.job == "worker");
  CHECK(s.replica == 0);
  CHECK(s.task == 1);
  CHECK(s.device_type == "CPU");
  CHECK(s.device_index == 0);
  CHECK(s.to_string() == "/job:worker/replica:0/task:1/device:CPU:0");
}

TEST_CASE("short device forms and case are normalised to /device:TYPE:N") {
  CHECK(DeviceSpec::parse("/job:worker/task:0/cpu:0").to_string() ==
        "/job:worker/task:0/device:CPU:0");
  CHECK(DeviceSpec::parse("/gpu:1").to_string() == "/device:GPU:1");
  CHECK(DeviceSpec::parse("/GPU:1") == DeviceSpec::parse("/device:GPU:1"));
  CHECK(DeviceSpec::parse("/device:gpu:1") == DeviceSpec::parse("/gpu:1"));
  CHECK(DeviceSpec::parse("/device:GPU:1").device_type == "GPU");
  // A type without an index, as TensorFlow reads "/cpu" and "/GPU".
  CHECK(DeviceSpec::parse("/job:ps/cpu").to_string() == "/job:ps/device:CPU:*");
  CHECK_FALSE(DeviceSpec::parse("/GPU").device_index);
  CHECK(error_of("/cpu/gpu:0") == "bad device spec \"/cpu/gpu:0\": duplicate field \"device\"");
  CHECK(DeviceSpec::parse("/device:GPU:1").device_index == 1);
}

TEST_CASE("partial specs keep unset fields unset") {
  const DeviceSpec ps = DeviceSpec::parse("/job:ps/task:1");
  CHECK(ps.job == "ps");
  CHECK(ps.task == 1);
  CHECK_FALSE(ps.replica.has_value());
  CHECK_FALSE(ps.device_type.has_value());
  CHECK_FALSE(ps.device_index.has_value());
  CHECK(ps.to_string() == "/job:ps/task:1");

  CHECK(DeviceSpec::parse("/task:3").to_string() == "/task:3");
  CHECK(DeviceSpec::parse("/replica:2").to_string() == "/replica:2");
  // Components in any order; the text comes out in canonical order.
  CHECK(DeviceSpec::parse("/cpu:0/task:2/job:worker").to_string() ==
        "/job:worker/task:2/device:CPU:0");
  // A type without an index, and wildcards.
  const DeviceSpec any_cpu = DeviceSpec::parse("/device:CPU");
  CHECK(any_cpu.device_type == "CPU");
  CHECK_FALSE(any_cpu.device_index.has_value());
  CHECK(any_cpu.to_string() == "/device:CPU:*");
  CHECK(DeviceSpec::parse("/cpu:*") == any_cpu);
  CHECK(DeviceSpec::parse("/job:worker/task:*").to_string() == "/job:worker");
}

TEST_CASE("the empty spec") {
  CHECK(DeviceSpec::parse("").empty());
  CHECK(DeviceSpec::parse("/").empty());
  CHECK(DeviceSpec::parse("").to_string().empty());
  CHECK(DeviceSpec{}.to_string().empty());
  CHECK_FALSE(DeviceSpec::parse("/task:0").empty());
}

TEST_CASE("to_string and parse round-trip") {
  for (const char* text :
       {"", "/job:worker", "/job:ps/task:1", "/device:GPU:1", "/device:CPU:*", "/device:*:3",
        "/job:worker/replica:0/task:1/device:CPU:0", "/replica:4/device:GPU:7",
        "/job:long_name_2/task:123456"}) {
    CAPTURE(text);
    const DeviceSpec s = DeviceSpec::parse(text);
    CHECK(s.to_string() == text);
    CHECK(DeviceSpec::parse(s.to_string()) == s);
  }
  // And from fields that parse never produces on its own.
  DeviceSpec odd;
  odd.device_index = 2;
  CHECK(DeviceSpec::parse(odd.to_string()) == odd);
}

TEST_CASE("merged_with: inner fields override the outer ones field by field") {
  const DeviceSpec outer = DeviceSpec::parse("/job:worker/task:0/cpu:0");
  CHECK(outer.merged_with(DeviceSpec::parse("/gpu:1")).to_string() ==
        "/job:worker/task:0/device:GPU:1");
  CHECK(outer.merged_with(DeviceSpec::parse("/task:3")).to_string() ==
        "/job:worker/task:3/device:CPU:0");
  CHECK(outer.merged_with(DeviceSpec::parse("/job:ps")).to_string() ==
        "/job:ps/task:0/device:CPU:0");
  CHECK(outer.merged_with(DeviceSpec{}) == outer);
  CHECK(DeviceSpec{}.merged_with(outer) == outer);
  // Same type without an index keeps the outer index.
  CHECK(DeviceSpec::parse("/gpu:1").merged_with(DeviceSpec::parse("/device:GPU")).to_string() ==
        "/device:GPU:1");
  // Another type drops it: the index belongs to the type.
  CHECK(DeviceSpec::parse("/gpu:1").merged_with(DeviceSpec::parse("/cpu:*")).to_string() ==
        "/device:CPU:*");
  CHECK(DeviceSpec::parse("/job:ps/task:1")
            .merged_with(DeviceSpec::parse("/replica:2"))
            .to_string() == "/job:ps/replica:2/task:1");
}

TEST_CASE("every malformed string is an InvalidArgument quoting it and naming the bad part") {
  CHECK(error_of("/job:worker/tsk:0") ==
        "bad device spec \"/job:worker/tsk:0\": unknown field \"tsk\"");
  CHECK(error_of("/task:-1") ==
        "bad device spec \"/task:-1\": task \"-1\" is not a non-negative integer");
  CHECK(error_of("/task:x") ==
        "bad device spec \"/task:x\": task \"x\" is not a non-negative integer");
  CHECK(error_of("/task:") ==
        "bad device spec \"/task:\": task \"\" is not a non-negative integer");
  CHECK(error_of("/task:1x") ==
        "bad device spec \"/task:1x\": task \"1x\" is not a non-negative integer");
  CHECK(error_of("/task:+1") ==
        "bad device spec \"/task:+1\": task \"+1\" is not a non-negative integer");
  CHECK(error_of("/task:99999999999") ==
        "bad device spec \"/task:99999999999\": task \"99999999999\" is not a non-negative "
        "integer");
  CHECK(error_of("/replica:-2") ==
        "bad device spec \"/replica:-2\": replica \"-2\" is not a non-negative integer");
  CHECK(error_of("/job:/task:0") == "bad device spec \"/job:/task:0\": empty job name");
  CHECK(error_of("/job:1ps") ==
        "bad device spec \"/job:1ps\": job name \"1ps\" must start with a letter and hold only "
        "letters, digits and '_'");
  CHECK(error_of("/job:a:b") ==
        "bad device spec \"/job:a:b\": job name \"a:b\" must start with a letter and hold only "
        "letters, digits and '_'");
  CHECK(error_of("/job:ps/task:0/job:worker") ==
        "bad device spec \"/job:ps/task:0/job:worker\": duplicate field \"job\"");
  CHECK(error_of("/task:0/task:0") ==
        "bad device spec \"/task:0/task:0\": duplicate field \"task\"");
  CHECK(error_of("/cpu:0/gpu:1") == "bad device spec \"/cpu:0/gpu:1\": duplicate field \"device\"");
  CHECK(error_of("/device:CPU:0/cpu:0") ==
        "bad device spec \"/device:CPU:0/cpu:0\": duplicate field \"device\"");
  CHECK(error_of("job:worker") == "bad device spec \"job:worker\": must start with '/'");
  CHECK(error_of("/job:worker/") ==
        "bad device spec \"/job:worker/\": empty component (doubled or trailing '/')");
  CHECK(error_of("//job:worker") ==
        "bad device spec \"//job:worker\": empty component (doubled or trailing '/')");
  CHECK(error_of("/task") == "bad device spec \"/task\": field \"task\" has no value");
  CHECK(error_of("/worker") == "bad device spec \"/worker\": unknown field \"worker\"");
  CHECK(error_of("/device:TPU:0") ==
        "bad device spec \"/device:TPU:0\": unknown device type \"TPU\" (expected CPU or GPU)");
  CHECK(error_of("/device::0") == "bad device spec \"/device::0\": empty device type");
  CHECK(error_of("/gpu:a") ==
        "bad device spec \"/gpu:a\": device index \"a\" is not a non-negative integer");
  CHECK(error_of("/device:GPU:0:1") ==
        "bad device spec \"/device:GPU:0:1\": device index \"0:1\" is not a non-negative integer");
  CHECK_THROWS_AS(DeviceSpec::parse("/tsk:0"), cohort::InvalidArgument);
}
