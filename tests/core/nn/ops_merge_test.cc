// Tests of core/nn/ops/merge.h: Add, Multiply, Subtract, Average, Maximum, Minimum, Concatenate
// and Slice.
#include "cohort/core/nn/ops/merge.h"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/embedding.h"
#include "cohort/core/nn/ops/masking.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/recurrent.h"
#include "core/nn/gradient_check.h"
#include "core/nn/train_loop.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::expect_model_gradients;
using cohort::testing::GradientCheckOptions;
using cohort::testing::random_tensor;
using cohort::testing::train_with_adam;

namespace {

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

// The exception text of `f`, which must throw InvalidArgument.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("no InvalidArgument");
  return "";
}

}  // namespace

TEST_CASE("Add sums its inputs; each input's gradient is the output's") {
  Graph graph;
  Add layer("add");
  const std::vector<Shape> shapes = {{2, 2}, {2, 2}, {2, 2}};
  CHECK(layer.num_inputs() == 0);
  CHECK(layer.build_node(graph, shapes) == Shape{2, 2});
  CHECK(graph.num_parameters() == 0);
  Tensor a({1, 2, 2}, std::vector<float>{1, 2, 3, 4});
  Tensor b({1, 2, 2}, std::vector<float>{10, 20, 30, 40});
  Tensor c({1, 2, 2}, std::vector<float>{-100, 0, 0.5f, 7});
  const Tensor* in[] = {&a, &b, &c};
  Tensor y;
  layer.forward_node(in, y, {});
  CHECK(y.shape() == Shape{1, 2, 2});
  CHECK(values(y) == std::vector<float>{-89, 22, 33.5f, 51});
  CHECK(layer.flops_per_example() == 8.0);

  const Tensor dy({1, 2, 2}, std::vector<float>{1, -2, 3, -4});
  Tensor da, dc;
  Tensor* grads[] = {&da, nullptr, &dc};  // the second input needs no gradient
  layer.backward_node(in, y, dy, grads, {});
  CHECK(values(da) == values(dy));
  CHECK(values(dc) == values(dy));
  CHECK(da.shape() == a.shape());
}

TEST_CASE("Add gradients match finite differences, two inputs and three") {
  for (int count : {2, 3}) {
    CAPTURE(count);
    Graph graph;
    Add layer("add");
    const std::vector<Shape> shapes(static_cast<std::size_t>(count), Shape{3, 4});
    layer.build_node(graph, shapes);
    std::vector<Tensor> inputs;
    for (int i = 0; i < count; ++i) inputs.push_back(random_tensor({2, 3, 4}, 10 + i));
    std::vector<Tensor*> pointers;
    for (Tensor& t : inputs) pointers.push_back(&t);
    expect_layer_gradients(layer, graph, pointers);
  }
}

TEST_CASE("Add with a fused ReLU is max(0, sum); its gradients pass where the sum is positive") {
  Graph graph;
  Add layer("add", Activation::kRelu);
  const std::vector<Shape> shapes = {{4}, {4}};
  layer.build_node(graph, shapes);
  Tensor a({1, 4}, std::vector<float>{1, -2, 3, -4});
  Tensor b({1, 4}, std::vector<float>{0.5f, 1, -5, 2});
  const Tensor* in[] = {&a, &b};
  Tensor y;
  layer.forward_node(in, y, {});
  CHECK(values(y) == std::vector<float>{1.5f, 0, 0, 0});
  const Tensor dy({1, 4}, std::vector<float>{1, 2, 3, 4});
  Tensor da, db;
  Tensor* grads[] = {&da, &db};
  layer.backward_node(in, y, dy, grads, {});
  CHECK(values(da) == std::vector<float>{1, 0, 0, 0});
  CHECK(values(db) == values(da));
  // Away from the kink the finite differences agree, for two inputs and three.
  for (int count : {2, 3}) {
    CAPTURE(count);
    Graph g;
    Add fused("add", Activation::kRelu);
    const std::vector<Shape> s(static_cast<std::size_t>(count), Shape{3, 4});
    fused.build_node(g, s);
    std::vector<Tensor> inputs;
    for (int i = 0; i < count; ++i) inputs.push_back(random_tensor({2, 3, 4}, 20 + i));
    std::vector<Tensor*> pointers;
    for (Tensor& t : inputs) pointers.push_back(&t);
    GradientCheckOptions options;
    options.step = 1e-3;
    expect_layer_gradients(fused, g, pointers, {}, options);
  }
}

TEST_CASE("Add rejects one input and inputs of different shapes, naming the layer") {
  Graph graph;
  Add layer("residual");
  const std::vector<Shape> one = {{4}};
  CHECK_THROWS_AS(layer.build_node(graph, one), InvalidArgument);
  const std::vector<Shape> differ = {{4, 4, 3}, {4, 4, 2}};
  const std::string message = error_of([&] { layer.build_node(graph, differ); });
  CHECK(message.find("\"residual\"") != std::string::npos);
  CHECK(message.find("[4, 4, 3]") != std::string::npos);
  CHECK(message.find("[4, 4, 2]") != std::string::npos);
  // The single-input forms are not for a merge layer.
  CHECK_THROWS_AS(layer.build(graph, {4}), InvalidArgument);
  // A batch that does not match.
  const std::vector<Shape> two = {{3}, {3}};
  layer.build_node(graph, two);
  Tensor a({2, 3}), b({2, 4}), y;
  const Tensor* in[] = {&a, &b};
  CHECK_THROWS_AS(layer.forward_node(in, y, {}), InvalidArgument);
}

TEST_CASE("Multiply: the element-wise product; each input's gradient the output's times the others") {
  Graph graph;
  Multiply layer("gate");
  const std::vector<Shape> shapes{{2}, {2}, {2}};
  CHECK(layer.build_node(graph, shapes) == Shape{2});
  Tensor a({1, 2}, std::vector<float>{2, 0}), b({1, 2}, std::vector<float>{3, 5}),
      c({1, 2}, std::vector<float>{-1, 4});
  const Tensor* in[] = {&a, &b, &c};
  Tensor y;
  layer.forward_node(in, y, {});
  CHECK(values(y) == std::vector<float>{-6, 0});
  Tensor dy({1, 2}, std::vector<float>{1, 2}), da, dc;
  Tensor* grads[] = {&da, nullptr, &dc};
  layer.backward_node(in, y, dy, grads, {});
  CHECK(values(da) == std::vector<float>{-3, 40});  // b * c, finite where a is 0
  CHECK(values(dc) == std::vector<float>{6, 0});
  for (int count : {2, 3}) {
    CAPTURE(count);
    Graph g;
    Multiply m("m");
    m.build_node(g, std::vector<Shape>(static_cast<std::size_t>(count), Shape{3, 4}));
    std::vector<Tensor> inputs;
    for (int i = 0; i < count; ++i) inputs.push_back(random_tensor({2, 3, 4}, 20 + i));
    std::vector<Tensor*> pointers;
    for (Tensor& t : inputs) pointers.push_back(&t);
    expect_layer_gradients(m, g, pointers);
  }
  CHECK_THROWS_AS(layer.build_node(graph, std::vector<Shape>{{2}, {3}}), InvalidArgument);
  CHECK(multiply("x")->name() == "x");
}

TEST_CASE("Subtract, Average, Maximum and Minimum by hand; their gradients") {
  Graph graph;
  Tensor a({1, 3}, std::vector<float>{1, 5, 2}), b({1, 3}, std::vector<float>{4, 5, -1}),
      c({1, 3}, std::vector<float>{0, 7, 2});
  const Tensor dy({1, 3}, std::vector<float>{1, 2, 3});
  const Tensor* two[] = {&a, &b};
  const Tensor* three[] = {&a, &b, &c};
  Tensor y, da, db, dc;
  Tensor* grads[] = {&da, &db, &dc};

  Subtract difference("diff");
  CHECK(difference.build_node(graph, std::vector<Shape>{{3}, {3}}) == Shape{3});
  difference.forward_node(two, y, {});
  CHECK(values(y) == std::vector<float>{-3, 0, 3});
  difference.backward_node(two, y, dy, std::span<Tensor* const>(grads, 2), {});
  CHECK(values(da) == std::vector<float>{1, 2, 3});
  CHECK(values(db) == std::vector<float>{-1, -2, -3});
  CHECK_THROWS_WITH_AS(subtract("diff")->build_node(graph, std::vector<Shape>{{3}, {3}, {3}}),
                       "Subtract \"diff\": takes two inputs (the first less the second), given 3",
                       InvalidArgument);

  Average mean("mean");
  mean.build_node(graph, std::vector<Shape>{{3}, {3}, {3}});
  mean.forward_node(three, y, {});
  CHECK(y[0] == doctest::Approx(5.0 / 3));
  CHECK(y[1] == doctest::Approx(17.0 / 3));
  CHECK(y[2] == doctest::Approx(1.0));
  mean.backward_node(three, y, dy, grads, {});
  for (const Tensor* g : {&da, &db, &dc})
    for (int i = 0; i < 3; ++i) CHECK((*g)[i] == doctest::Approx(dy[i] / 3.0));

  // Ties (5 and 5; 2 and 2) give the gradient to the first input holding the value.
  Extremum largest("max", true), smallest("min", false);
  largest.build_node(graph, std::vector<Shape>{{3}, {3}, {3}});
  smallest.build_node(graph, std::vector<Shape>{{3}, {3}, {3}});
  largest.forward_node(three, y, {});
  CHECK(values(y) == std::vector<float>{4, 7, 2});
  largest.backward_node(three, y, dy, grads, {});
  CHECK(values(da) == std::vector<float>{0, 0, 3});
  CHECK(values(db) == std::vector<float>{1, 0, 0});
  CHECK(values(dc) == std::vector<float>{0, 2, 0});
  smallest.forward_node(three, y, {});
  CHECK(values(y) == std::vector<float>{0, 5, -1});
  smallest.backward_node(three, y, dy, grads, {});
  CHECK(values(da) == std::vector<float>{0, 2, 0});
  CHECK(values(db) == std::vector<float>{0, 0, 3});
  CHECK(values(dc) == std::vector<float>{1, 0, 0});

  // A NaN that reaches the output takes the gradient, at the first input holding one.
  Tensor nan_a({1, 1}, std::vector<float>{1}), nan_b({1, 1}, std::vector<float>{std::nanf("")});
  const Tensor* with_nan[] = {&nan_a, &nan_b};
  Extremum pair("max2", true);
  pair.build_node(graph, std::vector<Shape>{{1}, {1}});
  pair.forward_node(with_nan, y, {});
  Tensor d1({1, 1}, std::vector<float>{5});
  pair.backward_node(with_nan, y, d1, std::span<Tensor* const>(grads, 2), {});
  if (std::isnan(y[0])) CHECK(values(db) == std::vector<float>{5});
  else CHECK(values(da) == std::vector<float>{5});

  // Finite differences, on inputs whose elements are apart (no ties to step across): ramps 0.05
  // apart, each input's shifted by a third of that from the last's.
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(subtract("s"));
  layers.push_back(average("a"));
  layers.push_back(maximum("x"));
  layers.push_back(minimum("n"));
  for (auto& layer : layers) {
    CAPTURE(layer->name());
    const std::size_t count = layer->name() == "s" ? 2 : 3;
    Graph g;
    layer->build_node(g, std::vector<Shape>(count, Shape{3, 4}));
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < count; ++i) {
      inputs.push_back(spaced_tensor({2, 3, 4}, 30 + i, 0.05f));
      for (float& v : inputs.back().span()) v += 0.0167f * static_cast<float>(i);
    }
    std::vector<Tensor*> pointers;
    for (Tensor& t : inputs) pointers.push_back(&t);
    expect_layer_gradients(*layer, g, pointers);
  }
}

TEST_CASE("Concatenate along the channels, by hand") {
  Graph graph;
  auto layer = concatenate("cat");
  const std::vector<Shape> shapes = {{2, 2}, {2, 1}};
  CHECK(layer->build_node(graph, shapes) == Shape{2, 3});
  Tensor a({2, 2, 2}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  Tensor b({2, 2, 1}, std::vector<float>{-1, -2, -3, -4});
  const Tensor* in[] = {&a, &b};
  Tensor y;
  layer->forward_node(in, y, {});
  CHECK(y.shape() == Shape{2, 2, 3});
  CHECK(values(y) == std::vector<float>{1, 2, -1, 3, 4, -2, 5, 6, -3, 7, 8, -4});
  Tensor dy({2, 2, 3});
  for (std::int64_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i);
  Tensor da, db;
  Tensor* grads[] = {&da, &db};
  layer->backward_node(in, y, dy, grads, {});
  CHECK(da.shape() == a.shape());
  CHECK(db.shape() == b.shape());
  CHECK(values(da) == std::vector<float>{0, 1, 3, 4, 6, 7, 9, 10});
  CHECK(values(db) == std::vector<float>{2, 5, 8, 11});
}

TEST_CASE("Concatenate along any axis matches an index-by-index reference") {
  struct Case {
    int axis;
    std::vector<Shape> shapes;
    int resolved;  // the axis, counted from 0
  };
  const std::vector<Case> cases = {
      {0, {{2, 3, 4}, {1, 3, 4}, {3, 3, 4}}, 0},
      {1, {{2, 3, 4}, {2, 1, 4}}, 1},
      {-2, {{2, 3, 4}, {2, 2, 4}}, 1},
      {-1, {{2, 3, 4}, {2, 3, 5}, {2, 3, 1}}, 2},
      {2, {{2, 3, 1}, {2, 3, 2}}, 2},
      {0, {{5}, {2}}, 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.axis);
    Graph graph;
    Concatenate layer("cat", c.axis);
    const Shape out = layer.build_node(graph, c.shapes);
    const auto resolved = static_cast<std::size_t>(c.resolved);
    Shape expected_shape = c.shapes[0];
    expected_shape[resolved] = 0;
    for (const Shape& s : c.shapes) expected_shape[resolved] += s[resolved];
    CHECK(out == expected_shape);

    const std::int64_t n = 2;
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < c.shapes.size(); ++i) {
      Shape batch = c.shapes[i];
      batch.insert(batch.begin(), n);
      inputs.push_back(random_tensor(batch, 30 + i));
    }
    std::vector<const Tensor*> in;
    for (const Tensor& t : inputs) in.push_back(&t);
    Tensor y;
    layer.forward_node(in, y, {});
    Shape batch_out = out;
    batch_out.insert(batch_out.begin(), n);
    REQUIRE(y.shape() == batch_out);
    // Walk each input's elements by multi-index and find them in the output.
    const auto axis = static_cast<std::size_t>(c.resolved) + 1;  // in the batch shape
    std::int64_t offset_along_axis = 0;
    for (const Tensor& t : inputs) {
      const Shape& s = t.shape();
      for (std::int64_t flat = 0; flat < t.size(); ++flat) {
        // Multi-index of `flat` in s, then the output's flat index with the axis shifted.
        std::vector<std::int64_t> index(s.size());
        std::int64_t rest = flat;
        for (std::size_t d = s.size(); d-- > 0;) {
          index[d] = rest % s[d];
          rest /= s[d];
        }
        index[axis] += offset_along_axis;
        std::int64_t at = 0;
        for (std::size_t d = 0; d < s.size(); ++d) at = at * batch_out[d] + index[d];
        REQUIRE(y[at] == t[flat]);
      }
      offset_along_axis += s[axis];
    }

    std::vector<Tensor*> pointers;
    for (Tensor& t : inputs) pointers.push_back(&t);
    expect_layer_gradients(layer, graph, pointers);
  }
}

TEST_CASE("Concatenate rejects mismatched shapes and bad axes, naming the layer and the shapes") {
  Graph graph;
  Concatenate layer("joined");
  const std::vector<Shape> differ = {{4, 4, 3}, {4, 5, 2}};
  const std::string message = error_of([&] { layer.build_node(graph, differ); });
  CHECK(message.find("\"joined\"") != std::string::npos);
  CHECK(message.find("[4, 4, 3]") != std::string::npos);
  CHECK(message.find("[4, 5, 2]") != std::string::npos);
  // Images of other sizes (a skip connection across an odd size): the way to make them agree.
  CHECK(message.find("crop the larger with cropping2d") != std::string::npos);
  const std::string vectors = error_of([&] { layer.build_node(graph, std::vector<Shape>{{4, 3}, {5, 2}}); });
  CHECK(vectors.find("cropping2d") == std::string::npos);
  const std::vector<Shape> ranks = {{4, 4, 3}, {4, 3}};
  CHECK_THROWS_AS(layer.build_node(graph, ranks), InvalidArgument);
  const std::vector<Shape> one = {{4, 4, 3}};
  CHECK_THROWS_AS(layer.build_node(graph, one), InvalidArgument);
  const std::vector<Shape> fine = {{4, 4, 3}, {4, 4, 2}};
  Concatenate far("far", 3), before("before", -4);
  CHECK_THROWS_AS(far.build_node(graph, fine), InvalidArgument);
  CHECK_THROWS_AS(before.build_node(graph, fine), InvalidArgument);
  CHECK(layer.build_node(graph, fine) == Shape{4, 4, 5});
}

TEST_CASE("Add and Concatenate inside a model: gradients through fan-out and fan-in") {
  Graph graph;
  Model model(graph);
  Node x = model.input({3, 3, 2});
  Node a = model.apply(conv2d("a", 2, 3), x);
  Node sum = model.apply(add("sum"), {a, x});  // a residual connection: x fans out
  Node b = model.apply(conv2d("b", 3, 1), x);
  Node joined = model.apply(concatenate("joined"), {sum, b});
  CHECK(model.graph().variables().size() == 4);
  Node flat = model.apply(flatten("flat"), joined);
  model.apply(dense("logits", 4), flat);
  graph.initialize(3);
  Tensor images = random_tensor({3, 3, 3, 2}, 4);
  const std::vector<std::int32_t> labels = {0, 3, 1};
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  const StepMetrics m = model.train_step(images, labels, grads, {});
  CHECK(std::isfinite(m.loss));
  CHECK(model.fetch("joined")->shape() == Shape{3, 3, 3, 5});
  GradientCheckOptions options;
  options.step = 1e-3;
  expect_model_gradients(model, images, labels, {}, options);
}

TEST_CASE("Slice takes a band of any axis; the slices of an axis concatenated give the input back") {
  const Tensor x = random_tensor({2, 3, 4, 5}, 12);
  for (int axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
    const Shape example = {3, 4, 5};
    const std::int64_t length = example[a];
    Graph graph;
    Slice head("head", 0, 1, axis), tail("tail", 1, length - 1, axis);
    Shape head_shape = example, tail_shape = example;
    head_shape[a] = 1;
    tail_shape[a] = length - 1;
    CHECK(head.build(graph, example) == head_shape);
    CHECK(tail.build(graph, example) == tail_shape);
    Tensor h, t, joined;
    head.forward(x, h, {});
    tail.forward(x, t, {});
    Concatenate concat("joined", axis);
    const std::vector<Shape> parts = {head_shape, tail_shape};
    concat.build_node(graph, parts);
    const Tensor* inputs[] = {&h, &t};
    concat.forward_node(inputs, joined, {});
    CHECK(values(joined) == values(x));
    Tensor input = random_tensor({2, 3, 4, 5}, 13);
    expect_layer_gradients(tail, graph, input);
  }
  Graph graph;
  Slice middle("middle", 1, 2);  // of [3, 4, 5]'s last axis: columns 1 and 2
  CHECK(middle.build(graph, {3, 4, 5}) == Shape{3, 4, 2});
  Tensor y;
  middle.forward(x, y, {});
  for (std::int64_t r = 0; r < 2 * 3 * 4; ++r)
    for (std::int64_t c = 0; c < 2; ++c) CHECK(y[r * 2 + c] == x[r * 5 + 1 + c]);
}

TEST_CASE("Slice refuses a band outside its axis, naming the layer and the shape") {
  Graph graph;
  CHECK_THROWS_WITH_AS(Slice("ids", 10, 8).build(graph, {15}),
                       "Slice \"ids\": [10, 18) is not within axis -1 of examples of shape [15]",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(Slice("ids", 0, 2, 2).build(graph, {15, 2}),
                       "Slice \"ids\": axis 2 is outside examples of shape [15, 2]",
                       InvalidArgument);
  CHECK_THROWS_AS(Slice("ids", 0, 0).build(graph, {15}), InvalidArgument);
  CHECK_THROWS_AS(Slice("ids", -1, 2).build(graph, {15}), InvalidArgument);
}

TEST_CASE("Two inputs in one example: token ids and numbers sliced apart, an LSTM and a Dense joined") {
  // 400 examples of 12 token ids (1..7, padded with 0 at the back) then 3 numbers; the class:
  // whether the last token is 4 or more, flipped where the numbers sum above 0. Neither part
  // alone tells it.
  const std::int64_t n = 400, steps = 12, numbers = 3;
  Tensor rows({n, steps + numbers});
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  const Tensor noise = random_tensor({n, numbers}, 21, -1.0f, 1.0f);
  std::uint64_t state = 5;
  for (std::int64_t b = 0; b < n; ++b) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto length = static_cast<std::int64_t>(2 + (state >> 33) % 11);
    float* row = rows.data() + b * (steps + numbers);
    for (std::int64_t t = 0; t < length; ++t) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      row[t] = static_cast<float>(1 + (state >> 33) % 7);
    }
    float sum = 0;
    for (std::int64_t k = 0; k < numbers; ++k) sum += row[steps + k] = noise[b * numbers + k];
    labels[static_cast<std::size_t>(b)] = (row[length - 1] >= 4.0f) != (sum > 0.0f) ? 1 : 0;
  }
  Graph graph;
  Model model(graph);
  Node input = model.input({steps + numbers});
  Node ids = model.apply(slice("ids", 0, steps), input);
  Node mask = model.apply(padding_mask("mask"), ids);
  Node text = model.apply(embedding("embed", 8, 8), ids);
  text = model.apply(lstm("lstm", 16), {text, mask});
  Node values = model.apply(slice("numbers", steps, numbers), input);
  values = model.apply(dense("numbers_dense", 16, Activation::kRelu), values);
  Node joined = model.apply(concatenate("joined"), {text, values});
  joined = model.apply(dense("hidden", 32, Activation::kRelu), joined);
  model.apply(dense("logits", 2), joined);
  model.set_loss(std::make_unique<SoftmaxCrossEntropyLoss>());
  graph.initialize(1);
  const Targets targets{labels, nullptr};
  train_with_adam(model, rows, targets, 300);
  CHECK(model.evaluate(rows, targets).metrics[0] > 0.95f);
}
