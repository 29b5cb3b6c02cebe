// StoreLayout (serial): where the parameter store keeps each part of the flat buffer on the ps
// tasks.
#include "cohort/core/dist/parameter_store.h"

#include <doctest/doctest.h>

#include <string>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/initializer.h"
#include "cohort/core/placement/replica_device_setter.h"

using cohort::Graph;
using cohort::StoreLayout;

TEST_CASE("each part keeps its place within a 64-byte line, and no two parts overlap") {
  cohort::ReplicaDeviceSetterOptions placement;
  placement.ps_tasks = 2;
  placement.max_shard_bytes = 4 * 1000;  // the 2500-float variable is split over both ps tasks
  Graph graph{cohort::ReplicaDeviceSetter(placement)};
  const std::int64_t sizes[] = {3, 17, 2500, 5, 31, 64, 1};
  for (std::size_t i = 0; i < std::size(sizes); ++i)
    graph.get_variable("v" + std::to_string(i), {sizes[i]}, cohort::Initializer::zeros());
  const StoreLayout layout = StoreLayout::from_graph(graph, 2);
  constexpr std::int64_t kLine = 16;  // floats in 64 bytes
  std::int64_t covered = 0;
  for (std::size_t i = 0; i < layout.segments.size(); ++i) {
    const auto& s = layout.segments[i];
    CAPTURE(i);
    CHECK((s.ps_offset - s.offset) % kLine == 0);
    CHECK(s.ps_offset + s.length <= layout.ps_sizes[static_cast<std::size_t>(s.ps)]);
    if (i > 0 && layout.segments[i - 1].ps == s.ps)
      CHECK(layout.segments[i - 1].ps_offset + layout.segments[i - 1].length <= s.ps_offset);
    covered += s.length;
  }
  CHECK(covered == graph.num_parameters());
  for (const std::int64_t size : layout.ps_sizes) CHECK(size % kLine == 0);
  // Padding stays small: at most a line per part and a line per task.
  std::int64_t held = 0;
  for (const std::int64_t size : layout.ps_sizes) held += size;
  const auto parts = static_cast<std::int64_t>(layout.segments.size());
  CHECK(held <= graph.num_parameters() + kLine * (parts + 2));
}
