// Metrics as objects (core/nn/loss.h): precision, recall, F1, the ROC and PR areas, the
// accuracies and mse against their formulas or exact values, counted over batches alike.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/loss.h"

using namespace cohort;

namespace {

// Uniform draws in [0, 1) from a 64-bit linear congruential generator: the same on every
// standard library, unlike std's distributions.
struct Uniform {
  std::uint64_t state;
  double operator()() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  }
};

}  // namespace

TEST_CASE("precision and recall, of sigmoid outputs and of one class of a classifier") {
  // Decisions: logit > 0. Predicted positive: 0 (a positive) and 2 (not): precision 1/2. The
  // positives 0 and 1: one found, recall 1/2.
  Tensor logits({1, 4}, std::vector<float>{2, -1, 0.5f, -3});
  Tensor targets({1, 4}, std::vector<float>{1, 1, 0, 0});
  const Targets t{{}, &targets};
  CHECK(Precision().compute(logits, t) == doctest::Approx(0.5));
  CHECK(Recall().compute(logits, t) == doctest::Approx(0.5));
  // Class 1 against the rest: rows 0 and 2 choose class 1; labels 1 at rows 0, 1.
  Tensor rows({4, 3}, std::vector<float>{0, 5, 1, 3, 2, 1, 0, 1, 0.5f, 1, 0, 0});
  const std::vector<std::int32_t> labels = {1, 1, 2, 0};
  CHECK(Precision().compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.5));
  CHECK(Recall().compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.5));
  // Class 0: chosen by rows 1 and 3, the label of row 3 alone.
  CHECK(Precision(0).compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.5));
  CHECK(Recall(0).compute(rows, Targets{labels, nullptr}) == doctest::Approx(1.0));
  CHECK(Recall(2).compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.0));
  CHECK_THROWS_AS(Precision(3).check({3}, TargetSpec::classes(3)), InvalidArgument);
  CHECK_THROWS_AS(Recall(-1), InvalidArgument);
  // F1, their harmonic mean from the counts: sigmoid outputs tp 1, fp 1, fn 1: 2/4; class 0 of
  // the classifier tp 1, fp 1, fn 0: 2/3; no positive anywhere: 0.
  CHECK(F1Score().compute(logits, t) == doctest::Approx(0.5));
  CHECK(F1Score(0).compute(rows, Targets{labels, nullptr}) == doctest::Approx(2.0 / 3));
  Tensor negatives({1, 2}, std::vector<float>{-1, -2});
  Tensor zeros({1, 2}, std::vector<float>{0, 0});
  CHECK(F1Score().compute(negatives, Targets{{}, &zeros}) == 0.0f);
  // By name, of class 1 or of the class after '@'.
  CHECK(make_metric("f1")->name() == "f1");
  CHECK(make_metric("recall@1")->name() == "recall@1");  // fetched by the name asked for
  CHECK(make_metric("recall@0")->name() == "recall@0");
  CHECK(make_metric("recall@0")->compute(rows, Targets{labels, nullptr}) == doctest::Approx(1.0));
  CHECK(make_metric("precision@12")->name() == "precision@12");
  CHECK(make_metric("auc@2")->name() == "auc@2");
  for (const char* bad : {"recall@", "recall@-1", "recall@x", "accuracy@1", "f1@1.5"})
    CHECK_THROWS_WITH_AS(make_metric(bad), doctest::Contains("a class after '@' is for precision, recall, f1, auc and pr_auc"),
                         InvalidArgument);
  // Of 0/1 targets every output counts together: a class is refused, not ignored.
  CHECK_NOTHROW(make_metric("recall")->check({5}, TargetSpec::values({5})));
  CHECK_THROWS_WITH_AS(make_metric("recall@3")->check({5}, TargetSpec::values({5})),
                       doctest::Contains("metric recall@3 does not fit the data: predictions [5] per example"),
                       InvalidArgument);
  CHECK_THROWS_AS(make_metric("f1@1")->check({5}, TargetSpec::values({5})), InvalidArgument);
  CHECK(higher_is_better("f1@3"));
  CHECK(higher_is_better("precision@0"));
  CHECK_FALSE(higher_is_better("mse"));
}

TEST_CASE("decision metrics of named classes: by name, and named by the class they score") {
  // Names numbered in sorted order, as a CSV file's: "fraud" is 0, "legit" 1. Rows 0 and 2
  // choose fraud, the labels fraud at rows 0 and 1.
  const std::vector<std::string> classes = {"fraud", "legit"};
  Tensor rows({4, 2}, std::vector<float>{2, 0, 0, 1, 3, 1, -1, 1});
  const std::vector<std::int32_t> labels = {0, 0, 1, 1};
  const Targets t{labels, nullptr};
  const auto fraud = make_metric("precision@fraud", classes);
  CHECK(fraud->name() == "precision@fraud");
  CHECK(fraud->compute(rows, t) == doctest::Approx(0.5));
  CHECK(make_metric("recall@fraud", classes)->compute(rows, t) == doctest::Approx(0.5));
  CHECK(make_metric("f1@legit", classes)->name() == "f1@legit");
  CHECK(dynamic_cast<BinaryDecisionMetric&>(*make_metric("auc@fraud", classes)).positive_class() == 0);
  // Asked for without a class, class 1 is scored, and the name says which it is.
  const auto plain = make_metric("precision", classes);
  CHECK(plain->name() == "precision@legit");
  CHECK(plain->compute(rows, t) == doctest::Approx(Precision(1).compute(rows, t)));
  // A number still picks a class, and keeps the name it was asked by; a name comes first.
  CHECK(make_metric("recall@0", classes)->name() == "recall@0");
  CHECK(make_metric("recall@0", classes)->compute(rows, t) == doctest::Approx(0.5));
  const std::vector<std::string> digits = {"0", "1", "x"};
  CHECK(dynamic_cast<BinaryDecisionMetric&>(*make_metric("recall@1", digits)).positive_class() == 1);
  const std::vector<std::string> shifted = {"1", "x"};
  CHECK(dynamic_cast<BinaryDecisionMetric&>(*make_metric("recall@1", shifted)).positive_class() == 0);
  CHECK_THROWS_WITH_AS(make_metric("precision@frod", classes),
                       "metric 'precision@frod': no class named 'frod' (the classes: fraud, legit)", InvalidArgument);
  CHECK_THROWS_WITH_AS(make_metric("accuracy@fraud", classes), doctest::Contains("unknown metric 'accuracy@fraud'"),
                       InvalidArgument);
  CHECK(make_metric("accuracy", classes)->name() == "accuracy");
  CHECK(higher_is_better("precision@legit"));
}

TEST_CASE("AUC: bins of the log-odds, near the exact area, 1 for a perfect ranking") {
  // 400 scores; the positives' drawn a little higher: the exact area is the chance that a
  // positive outscores a negative.
  Tensor logits({400, 1}), targets({400, 1});
  Uniform uniform{12345};
  for (int i = 0; i < 400; ++i) {
    targets[i] = i % 3 == 0 ? 1.0f : 0.0f;
    logits[i] = static_cast<float>(4 * uniform() - 2 + (targets[i] > 0 ? 1.0 : 0.0));
  }
  double wins = 0, pairs = 0;
  for (int i = 0; i < 400; ++i)
    for (int j = 0; j < 400; ++j)
      if (targets[i] > 0 && targets[j] == 0) {
        pairs += 1;
        wins += logits[i] > logits[j] ? 1 : logits[i] == logits[j] ? 0.5 : 0;
      }
  Auc auc;
  const Targets t{{}, &targets};
  CHECK(auc.compute(logits, t) == doctest::Approx(wins / pairs).epsilon(0.01));
  // Counted in two halves and summed, the same as the whole (what an evaluation does).
  const Tensor first({200, 1}, std::vector<float>(logits.data(), logits.data() + 200));
  const Tensor second({200, 1}, std::vector<float>(logits.data() + 200, logits.data() + 400));
  const Tensor t1({200, 1}, std::vector<float>(targets.data(), targets.data() + 200));
  const Tensor t2({200, 1}, std::vector<float>(targets.data() + 200, targets.data() + 400));
  for (Metric* metric : std::initializer_list<Metric*>{new Auc(), new Precision(), new Recall(), new F1Score()}) {
    std::unique_ptr<Metric> owned(metric);
    CAPTURE(metric->name());
    std::vector<double> sum = metric->counts(first, Targets{{}, &t1}, 0);
    const std::vector<double> more = metric->counts(second, Targets{{}, &t2}, 0);
    for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += more[k];
    CHECK(metric->from_counts(sum) == doctest::Approx(metric->compute(logits, t)));
  }
  // A diverged model's NaN scores are above no threshold, as Keras counts them: a positive that
  // has one is never found (here the only one, 0), and another half of the time (0.5).
  Tensor diverged({1, 3}, std::vector<float>{std::nanf(""), 2, -1});
  Tensor mixed({1, 3}, std::vector<float>{1, 0, 0});
  CHECK(auc.compute(diverged, Targets{{}, &mixed}) == 0.0f);
  Tensor half({1, 3}, std::vector<float>{std::nanf(""), 3, -3});
  Tensor two({1, 3}, std::vector<float>{1, 1, 0});
  CHECK(auc.compute(half, Targets{{}, &two}) == doctest::Approx(0.5));
  Tensor separated({2, 2}, std::vector<float>{3, -3, 5, -4});
  Tensor truth({2, 2}, std::vector<float>{1, 0, 1, 0});
  CHECK(auc.compute(separated, Targets{{}, &truth}) == doctest::Approx(1.0));
  // Very confident scores, beyond log-odds of 16, keep their order on either side: positives at
  // 30 and 40 above negatives at 17 and 20 (all ties in one end bin before), and the mirror.
  Tensor confident({1, 4}, std::vector<float>{30, 40, 17, 20});
  Tensor split({1, 4}, std::vector<float>{1, 1, 0, 0});
  CHECK(auc.compute(confident, Targets{{}, &split}) == doctest::Approx(1.0));
  Tensor unsure({1, 4}, std::vector<float>{-17, -20, -30, -40});
  CHECK(auc.compute(unsure, Targets{{}, &split}) == doctest::Approx(1.0));
  Tensor far({1, 4}, std::vector<float>{1e30f, std::numeric_limits<float>::infinity(), 1e20f, -1e30f});
  // Past 16 * 2^16, one bin: the negative at 1e20 ties with both positives.
  CHECK(auc.compute(far, Targets{{}, &split}) == doctest::Approx(0.75));
  Tensor one_class({1, 2}, std::vector<float>{3, 5});
  Tensor ones({1, 2}, std::vector<float>{1, 1});
  CHECK(auc.compute(one_class, Targets{{}, &ones}) == 0.0f);
  CHECK(make_metric("auc")->name() == "auc");
  CHECK(make_metric("top3_accuracy")->name() == "top3_accuracy");
  CHECK_THROWS_AS(make_metric("top0_accuracy"), InvalidArgument);
  CHECK_THROWS_WITH_AS(make_metric("f2"), doctest::Contains("unknown metric 'f2'"), InvalidArgument);
}

TEST_CASE("AUC of a rare class whose scores are all near 0: within 1e-3 of the exact area") {
  // 1% positives among 20000, every score between 1e-4 and 1e-2 (log-uniform), the positives'
  // a little higher: 200 thresholds evenly over [0, 1], as Keras's, had most of them below the
  // first (1/199) and the area far off.
  constexpr int n = 20000;
  Tensor logits({n, 1}), targets({n, 1});
  Uniform uniform{99};
  std::vector<float> positives, negatives;
  for (int i = 0; i < n; ++i) {
    const bool positive = i % 100 == 0;
    const double p = std::pow(10.0, positive ? -2.4 + 0.4 * uniform() : -4 + 2 * uniform());
    targets[i] = positive ? 1.0f : 0.0f;
    logits[i] = static_cast<float>(std::log(p / (1 - p)));
    (positive ? positives : negatives).push_back(logits[i]);
  }
  // The exact area: the chance that a positive outscores a negative (a tie: a half).
  std::sort(negatives.begin(), negatives.end());
  double wins = 0;
  for (const float s : positives) {
    const auto below = std::lower_bound(negatives.begin(), negatives.end(), s) - negatives.begin();
    const auto ties = std::upper_bound(negatives.begin(), negatives.end(), s) - negatives.begin() - below;
    wins += static_cast<double>(below) + 0.5 * static_cast<double>(ties);
  }
  const double exact = wins / (static_cast<double>(positives.size()) * static_cast<double>(negatives.size()));
  REQUIRE(exact > 0.85);
  REQUIRE(exact < 0.97);
  CHECK(std::abs(Auc().compute(logits, Targets{{}, &targets}) - exact) < 1e-3);
  // The same as a classifier's class 1 against class 0 (its softmax: the same probabilities).
  Tensor rows({n, 2});
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) {
    rows[2 * i] = 0;
    rows[2 * i + 1] = logits[i];
    labels[static_cast<std::size_t>(i)] = targets[i] > 0 ? 1 : 0;
  }
  CHECK(std::abs(Auc(1).compute(rows, Targets{labels, nullptr}) - exact) < 1e-3);
  // And the scores near 1 alike: class 0's, 1 - p, ranked the other way round by the other class.
  CHECK(std::abs(Auc(0).compute(rows, Targets{labels, nullptr}) - exact) < 1e-3);
  // Near 1 as a sigmoid's and as a class's: log-odds 11 to 15, where a float probability is
  // within 2e-5 of 1 and would have lost most bins; the logits keep them.
  Tensor high = logits;
  for (int i = 0; i < n; ++i) {
    high[i] += 20.0f;
    rows[2 * i + 1] = high[i];
  }
  CHECK(std::abs(Auc().compute(high, Targets{{}, &targets}) - exact) < 1e-3);
  CHECK(std::abs(Auc(1).compute(rows, Targets{labels, nullptr}) - exact) < 1e-3);
}

TEST_CASE("PR AUC: average precision of a rare class, near the exact value, counted over batches") {
  // 2% positives among 5000, scores drawn apart (distinct): average precision is the mean, over
  // the positives ranked from the top, of the precision at each.
  constexpr int n = 5000;
  Tensor logits({n, 1}), targets({n, 1});
  Uniform uniform{7};
  std::vector<std::pair<float, bool>> ranked;
  for (int i = 0; i < n; ++i) {
    const bool positive = i % 50 == 0;
    targets[i] = positive ? 1.0f : 0.0f;
    logits[i] = static_cast<float>(8 * uniform() - 6 + (positive ? 3.0 : 0.0));
    ranked.emplace_back(logits[i], positive);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  double found = 0, sum = 0;
  for (std::size_t k = 0; k < ranked.size(); ++k)
    if (ranked[k].second) sum += ++found / static_cast<double>(k + 1);
  const double exact = sum / found;
  REQUIRE(exact > 0.2);
  REQUIRE(exact < 0.8);
  PrAuc pr;
  const Targets t{{}, &targets};
  CHECK(pr.name() == "pr_auc");
  CHECK(std::abs(pr.compute(logits, t) - exact) < 2e-3);
  // Two halves counted and summed: the whole's value.
  const Tensor first({n / 2, 1}, std::vector<float>(logits.data(), logits.data() + n / 2));
  const Tensor second({n / 2, 1}, std::vector<float>(logits.data() + n / 2, logits.data() + n));
  const Tensor t1({n / 2, 1}, std::vector<float>(targets.data(), targets.data() + n / 2));
  const Tensor t2({n / 2, 1}, std::vector<float>(targets.data() + n / 2, targets.data() + n));
  std::vector<double> counts = pr.counts(first, Targets{{}, &t1}, 0);
  const std::vector<double> more = pr.counts(second, Targets{{}, &t2}, 0);
  for (std::size_t k = 0; k < counts.size(); ++k) counts[k] += more[k];
  CHECK(pr.from_counts(counts) == doctest::Approx(pr.compute(logits, t)));
  // A perfect ranking is 1; one that puts every positive last, their share at the bottom.
  Tensor separated({1, 4}, std::vector<float>{3, 2, -1, -2});
  Tensor truth({1, 4}, std::vector<float>{1, 1, 0, 0});
  CHECK(pr.compute(separated, Targets{{}, &truth}) == doctest::Approx(1.0));
  Tensor reversed({1, 4}, std::vector<float>{-3, -2, 1, 2});
  CHECK(pr.compute(reversed, Targets{{}, &truth}) == doctest::Approx((1.0 / 3 + 2.0 / 4) / 2));
  Tensor none({1, 4}, std::vector<float>{0, 0, 0, 0});
  CHECK(pr.compute(separated, Targets{{}, &none}) == 0.0f);
  CHECK(make_metric("pr_auc@3")->name() == "pr_auc@3");
  CHECK(Metric::direction_by_name("pr_auc@3") == true);
}

TEST_CASE("metrics: accuracy, top-k, binary accuracy, mse") {
  Tensor x({3, 4}, std::vector<float>{0.1f, 0.5f, 0.3f, 0.2f,   //
                                      0.9f, 0.0f, 0.8f, 0.7f,   //
                                      0.0f, 0.1f, 0.2f, 0.3f});
  const std::vector<std::int32_t> labels = {2, 3, 3};
  const Targets t{labels, nullptr};
  CHECK(Accuracy().compute(x, t) == doctest::Approx(1.0 / 3));
  CHECK(TopKAccuracy(2).compute(x, t) == doctest::Approx(2.0 / 3));  // 0.3 is 2nd, 0.7 is 3rd
  CHECK(TopKAccuracy(3).compute(x, t) == doctest::Approx(1.0));
  CHECK(TopKAccuracy(2).name() == "top2_accuracy");
  // As TensorFlow's in_top_k: classes tied at the boundary are all in the top k; a row with a
  // logit that is not finite is never a hit.
  Tensor ties({2, 3}, std::vector<float>{1, 1, 1,  //
                                         std::nanf(""), 0, 1});
  const std::vector<std::int32_t> last = {2, 2};
  CHECK(TopKAccuracy(1).compute(ties, Targets{last, nullptr}) == doctest::Approx(0.5));
  CHECK(TopKAccuracy(3).compute(ties, Targets{last, nullptr}) == doctest::Approx(0.5));
  // Nor does a row with an infinite logit predict a class for Accuracy, or a class decision.
  const float inf = std::numeric_limits<float>::infinity();
  Tensor diverged({2, 3}, std::vector<float>{inf, 0, 1,  //
                                             2, 0, 1});
  const std::vector<std::int32_t> first = {0, 0};
  CHECK(Accuracy().compute(diverged, Targets{first, nullptr}) == doctest::Approx(0.5));
  CHECK(Precision(0).compute(diverged, Targets{first, nullptr}) == doctest::Approx(1.0));
  CHECK(Recall(0).compute(diverged, Targets{first, nullptr}) == doctest::Approx(0.5));
  Tensor logits({1, 4}, std::vector<float>{2, -1, 0.5f, -3});
  Tensor targets({1, 4}, std::vector<float>{1, 1, 0, 0});
  CHECK(BinaryAccuracy().compute(logits, Targets{{}, &targets}) == doctest::Approx(0.5));
  // A NaN logit is right about neither target, an infinite one is a prediction.
  Tensor nan_logits({1, 4}, std::vector<float>{std::nanf(""), std::nanf(""), -INFINITY, INFINITY});
  Tensor mixed({1, 4}, std::vector<float>{0, 1, 0, 1});
  CHECK(BinaryAccuracy().compute(nan_logits, Targets{{}, &mixed}) == doctest::Approx(0.5));
  CHECK(MeanSquaredError().compute(logits, Targets{{}, &targets}) ==
        doctest::Approx((1 + 4 + 0.25 + 9) / 4.0));
  CHECK_THROWS_AS(TopKAccuracy(0), InvalidArgument);
  // StepMetrics::accuracy: "accuracy", else the categorical or binary one (never a top-k).
  using Names = std::vector<std::string>;
  CHECK(accuracy_metric(Names{"top5_accuracy", "accuracy"}) == 1);
  CHECK(accuracy_metric(Names{"top5_accuracy", "categorical_accuracy"}) == 1);
  CHECK(accuracy_metric(Names{"mse", "binary_accuracy", "categorical_accuracy"}) == 1);
  CHECK(accuracy_metric(Names{"top5_accuracy", "mse"}) == -1);
}
