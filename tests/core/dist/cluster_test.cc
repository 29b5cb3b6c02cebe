// parse_cluster_spec_json: both JSON forms and their errors (no MPI needed).
#include "cohort/core/dist/cluster.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using cohort::InvalidArgument;
using cohort::parse_cluster_spec_json;
using Jobs = std::vector<std::pair<std::string, std::vector<int>>>;

namespace {

std::string message_of(const std::string& text, int world_size) {
  try {
    parse_cluster_spec_json(text, world_size);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

// As a doctest string, so that CHECK(error_of(...) == doctest::Contains(...)) prints it.
doctest::String error_of(const std::string& text, int world_size = 4) {
  return message_of(text, world_size).c_str();
}

}  // namespace

TEST_CASE("ranks form: job -> ranks, in the order written") {
  CHECK(parse_cluster_spec_json(R"({"ps":[0,1],"worker":[2,3,4,5]})", 6) ==
        Jobs{{"ps", {0, 1}}, {"worker", {2, 3, 4, 5}}});
  // Order and gaps are kept as written; ClusterSpec validates them against the world.
  CHECK(parse_cluster_spec_json(R"({"worker":[3,1],"ps":[0],"chief":[2]})", 4) ==
        Jobs{{"worker", {3, 1}}, {"ps", {0}}, {"chief", {2}}});
  CHECK(parse_cluster_spec_json(R"( {"worker":[0], "ps":[]} )", 1) ==
        Jobs{{"worker", {0}}, {"ps", {}}});
  // Out-of-range ranks are passed on (ClusterSpec names them), not wrapped.
  CHECK(parse_cluster_spec_json(R"({"worker":[0,9,-1]})", 3) == Jobs{{"worker", {0, 9, -1}}});
}

TEST_CASE("TF_CONFIG form: host:port entries bound to ranks in order of appearance") {
  const std::string tf_config = R"({"cluster":{"ps":["h1:2222"],"worker":["h2:2222","h3:2222"]},
                                    "task":{"type":"worker","index":0}})";
  CHECK(parse_cluster_spec_json(tf_config, 3) == Jobs{{"ps", {0}}, {"worker", {1, 2}}});
  // The addresses by rank and the keys beside "cluster", for the warnings about them.
  std::map<int, std::string> addresses;
  std::vector<std::string> ignored;
  parse_cluster_spec_json(tf_config, 3, &addresses, &ignored);
  CHECK(addresses == std::map<int, std::string>{{0, "h1:2222"}, {1, "h2:2222"}, {2, "h3:2222"}});
  CHECK(ignored == std::vector<std::string>{"task"});
  // Jobs bind in the order they appear, not alphabetically.
  CHECK(parse_cluster_spec_json(R"({"cluster":{"worker":["a:1","b:1"],"ps":["c:1"]}})", 3) ==
        Jobs{{"worker", {0, 1}}, {"ps", {2}}});
  // The bare cluster dict is accepted too.
  CHECK(parse_cluster_spec_json(R"({"chief":["a:1"],"worker":["b:1"]})", 2) ==
        Jobs{{"chief", {0}}, {"worker", {1}}});
  // The cluster dict may also give ranks.
  CHECK(parse_cluster_spec_json(R"({"cluster":{"worker":[1,0]}})", 2) == Jobs{{"worker", {1, 0}}});
}

TEST_CASE("bad specs are refused, quoting the text") {
  CHECK(error_of(R"({"ps":[0],"worker":[1,2)") ==
        doctest::Contains(R"(cluster spec is not valid JSON)"));
  CHECK(error_of(R"({"ps":[0],"worker":[1,2)") ==
        doctest::Contains(R"('{"ps":[0],"worker":[1,2')"));
  CHECK(error_of("") == doctest::Contains("not valid JSON"));
  CHECK(error_of("[0,1]") == doctest::Contains("must be a JSON object mapping jobs to lists"));
  CHECK(error_of("{}") == doctest::Contains("names no jobs"));
  CHECK(error_of(R"({"cluster":[1]})") == doctest::Contains(R"("cluster" must be an object)"));
  CHECK(error_of(R"({"ps":0,"worker":[1]})") ==
        doctest::Contains("job 'ps' must be a list of ranks or host:port strings, got 0"));
  CHECK(error_of(R"({"cluster":{"ps":{"0":"h:1"},"worker":["h:2"]}})") ==
        doctest::Contains("job 'ps' must be a list"));
  CHECK(error_of(R"({"worker":[0,1.5]})") ==
        doctest::Contains("job 'worker' has entry 1.5, which is neither a rank"));
  CHECK(error_of(R"({"worker":[0,null]})") == doctest::Contains("entry null"));
  CHECK(error_of(R"({"ps":["h:1"],"worker":[1]})") ==
        doctest::Contains("mixes ranks and host:port strings"));
  CHECK(error_of(R"({"cluster":{"ps":["a:1"],"worker":["b:1","c:1","d:1"]}})", 3) ==
        doctest::Contains("cluster spec has 4 tasks but the job has 3 ranks"));
}

TEST_CASE("a long spec is quoted shortened") {
  const std::string text = "{\"worker\":[" + std::string(400, ' ') + "0,]}";
  const std::string message = message_of(text, 4);
  CHECK(message.find("...'") != std::string::npos);
  CHECK(message.size() < 500);
}
