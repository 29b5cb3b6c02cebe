// A language model trained on the user's own text, on any number of workers, and the text it
// writes after a prompt:
//
//   mpirun -np 4 build/bin/example_language_model --train=corpus.txt --checkpoint_dir=ckpt
//   build/bin/example_language_model --checkpoint_dir=ckpt --prompt="It was" --generate=300
//
// The text (a file, or the .txt files under a folder, in sorted order) is split into characters
// (or words), kept as written, and made token ids by a vocabulary of its --max_tokens most
// frequent tokens. Windows of --sequence_length ids, --stride apart, are the examples; each
// step's target is the token after it (a class index per step: sparse categorical
// cross-entropy). The last --validation_split of the text is held out, whole, to measure the
// perplexity on. The model: an embedding, then --layers causal Transformer blocks of --units
// (with a position embedding) or LSTMs, then a row of logits per step. The chief reports the
// held-out loss and perplexity, keeps the vocabulary beside the checkpoints, and writes
// --generate tokens after --prompt, each drawn with --temperature, --top_k and --top_p.
#include <cohort/cohort.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

COHORT_DEFINE_string(train, "", "the text: a file, or a folder whose .txt files (at any depth, sorted) are read one after another");
COHORT_DEFINE_float(validation_split, 0.1, "the last fraction of the text, held out to measure the perplexity on",
                    cohort::flags::Range{0, 0.9});
COHORT_DEFINE_string(split, "characters", "tokens: characters, or words (between white space)",
                     cohort::flags::Choices{"characters", "words"});
COHORT_DEFINE_int(max_tokens, 20000, "the vocabulary's size, ids 0 (padding) and 1 (unknown) included",
                  cohort::flags::Range{3, 1 << 24});
COHORT_DEFINE_int(sequence_length, 64, "tokens a window, the model's context", cohort::flags::Range{2, 1 << 16});
COHORT_DEFINE_int(stride, 0, "tokens between windows (0: --sequence_length, windows side by side)",
                  cohort::flags::Range{0, 1 << 16});
COHORT_DEFINE_string(model, "transformer", "the layers", cohort::flags::Choices{"transformer", "lstm"});
COHORT_DEFINE_int(layers, 2, "Transformer blocks or LSTMs", cohort::flags::Range{1, 64});
COHORT_DEFINE_int(units, 64, "the width of the embedding and of every layer", cohort::flags::Range{1, 1 << 16});
COHORT_DEFINE_int(heads, 4, "attention heads a Transformer block (a divisor of --units)", cohort::flags::Range{1, 1024});
COHORT_DEFINE_float(dropout, 0.0, "dropout in the Transformer blocks", cohort::flags::Range{0, 0.9});
COHORT_DEFINE_string(mode, "allreduce", "how workers combine updates (sync, async, ssp need --ps_tasks)",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"});
COHORT_DEFINE_float(learning_rate, 0.003, "Adam's learning rate", cohort::flags::Range{.min = 0, .max = 1, .min_excluded = true});
COHORT_DEFINE_int(lr_warmup_steps, 50, "global steps over which the learning rate rises to its value, before a cosine decay",
                  cohort::flags::Range{0, 1e12});
COHORT_DEFINE_float(clip_norm, 1.0, "clip gradients to this global norm (0: no clipping)", cohort::flags::Range{0, 1e30});
COHORT_DEFINE_int(batch_size, 32, "windows per worker step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_int(train_steps, 500, "global steps to train", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_int(seed, 1, "the initial values, the data order and the draws of --generate", cohort::flags::Range{0, 1e15});
COHORT_DEFINE_string(checkpoint_dir, "", "chief: restore the latest checkpoint from, and save checkpoints to, here (with the vocabulary)");
COHORT_DEFINE_string(metrics_json, "", "chief: write the held-out loss and perplexity to this JSON file");
COHORT_DEFINE_string(prompt, "", "the text --generate continues");
COHORT_DEFINE_int(generate, 0, "chief: tokens to write after --prompt (without --train: with --checkpoint_dir's latest checkpoint)",
                  cohort::flags::Range{0, 1 << 20});
COHORT_DEFINE_float(temperature, 0.8, "--generate's temperature: below 1 surer, above 1 freer", cohort::flags::Range{.min = 0, .max = 100, .min_excluded = true});
COHORT_DEFINE_int(top_k, 0, "--generate draws from the k likeliest tokens (0: all)", cohort::flags::Range{0, 1 << 24});
COHORT_DEFINE_float(top_p, 1.0, "--generate draws from the likeliest tokens whose probabilities reach this", cohort::flags::Range{.min = 0, .max = 1, .min_excluded = true});

namespace {

cohort::data::TextOptions text_options() {
  cohort::data::TextOptions text;
  text.split = FLAGS_split == "words" ? cohort::data::TextOptions::Split::kWords
                                      : cohort::data::TextOptions::Split::kCharacters;
  text.lowercase = false;  // the text as written: the model writes it so
  text.strip_punctuation = false;
  text.max_tokens = FLAGS_max_tokens;
  return text;
}

// The flags the model depends on (recorded in every checkpoint; a resumed job must give the same,
// and generation from a checkpoint takes them from it).
std::map<std::string, std::string> settings() {
  return cohort::flags::flag_values({"split", "max_tokens", "sequence_length", "model", "layers", "units", "heads"});
}

cohort::Model language_model(cohort::Graph& graph, std::int64_t vocabulary) {
  if (FLAGS_units % FLAGS_heads != 0 && FLAGS_model == "transformer")
    throw cohort::InvalidArgument("--heads=" + std::to_string(FLAGS_heads) + " does not divide --units=" + std::to_string(FLAGS_units));
  cohort::Model model(graph);
  cohort::Node x = model.apply(cohort::embedding("embed", vocabulary, FLAGS_units), model.input({FLAGS_sequence_length}));
  if (FLAGS_model == "lstm") {
    for (int i = 0; i < FLAGS_layers; ++i)
      x = model.apply(cohort::lstm("lstm" + std::to_string(i + 1), FLAGS_units, {.return_sequences = true}), x);
  } else {
    x = model.apply(cohort::position_embedding("position"), x);
    for (int i = 0; i < FLAGS_layers; ++i)
      x = cohort::transformer_block(model, x, "block" + std::to_string(i + 1), FLAGS_heads, 4 * FLAGS_units,
                                    static_cast<float>(FLAGS_dropout), /*causal=*/true);
    x = model.apply(cohort::layer_norm("norm"), x);
  }
  model.apply(cohort::dense("logits", vocabulary, cohort::Activation::kNone, /*flatten=*/false), x);
  model.set_loss(std::make_unique<cohort::SparseCategoricalCrossEntropyLoss>());
  model.add_metric(cohort::make_metric("perplexity"));
  return model;
}

// The text of --train: the file, or the folder's .txt files one after another.
std::string read_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  if (fs::is_directory(path)) {
    for (const auto& entry : fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink))
      if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw cohort::InvalidArgument("--train=" + path + ": no .txt files in it");
  } else {
    files.push_back(path);
  }
  std::string text;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw cohort::InvalidArgument("--train: " + file + ": cannot read it");
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!text.empty() && !text.ends_with('\n')) text += '\n';  // files apart
  }
  return text;
}

// A vectorizer of the vocabulary a job kept in `path` (of any size: the one it was made with).
cohort::data::TextVectorizer saved_vocabulary(const std::string& path) {
  cohort::data::TextOptions any = text_options();
  any.max_tokens = 1 << 24;
  cohort::data::TextVectorizer vectorizer(any);
  vectorizer.load_vocabulary(path);
  return vectorizer;
}

// The ids of `tokens` (1 for one outside the vocabulary).
std::vector<float> token_ids(const cohort::data::TextVectorizer& vectorizer, const std::vector<std::string>& tokens) {
  std::unordered_map<std::string, float> ids;
  const std::vector<std::string>& vocabulary = vectorizer.vocabulary();
  for (std::size_t i = 2; i < vocabulary.size(); ++i) ids.emplace(vocabulary[i], static_cast<float>(i));
  std::vector<float> out;
  for (const std::string& token : tokens) {
    const auto found = ids.find(token);
    out.push_back(found == ids.end() ? 1.0f : found->second);
  }
  return out;
}

// `tokens` joined back into text: characters side by side, words with a space between.
std::string joined(std::vector<std::string>::const_iterator first, std::vector<std::string>::const_iterator last) {
  std::string text;
  for (auto it = first; it != last; ++it) text += (FLAGS_split == "words" && it != first ? " " : "") + *it;
  return text;
}

// Windows of `ids` from `first` to `last` (not past it), the next token of each step their
// targets: [windows, sequence_length] each.
cohort::data::Dataset windows(const std::vector<float>& ids, std::size_t first, std::size_t last, const std::string& name) {
  const auto length = static_cast<std::size_t>(FLAGS_sequence_length);
  const std::size_t stride = FLAGS_stride > 0 ? static_cast<std::size_t>(FLAGS_stride) : length;
  std::vector<float> x, y;
  std::int64_t n = 0;
  for (std::size_t start = first; start + length + 1 <= last; start += stride, ++n) {
    x.insert(x.end(), ids.begin() + static_cast<std::ptrdiff_t>(start), ids.begin() + static_cast<std::ptrdiff_t>(start + length));
    y.insert(y.end(), ids.begin() + static_cast<std::ptrdiff_t>(start + 1), ids.begin() + static_cast<std::ptrdiff_t>(start + length + 1));
  }
  if (n == 0)
    throw cohort::InvalidArgument(name + ": " + std::to_string(last - first) + " tokens make no window of " +
                                  std::to_string(length) + " and its next token (a shorter --sequence_length" +
                                  (first > 0 ? ", or a larger --validation_split, or 0?)" : "?)"));
  const std::int64_t l = FLAGS_sequence_length;
  return cohort::data::Dataset::from_arrays(cohort::Tensor({n, l}, x), cohort::Tensor({n, l}, y), name);
}

// --generate tokens after --prompt, drawn one at a time from the model's last window of context,
// printed as they are joined (characters side by side, words with a space); neither padding nor
// the unknown token is drawn.
void generate(cohort::Model& model, const cohort::data::TextVectorizer& vectorizer) {
  std::vector<float> context = token_ids(vectorizer, vectorizer.tokens(FLAGS_prompt));
  if (context.empty())
    throw cohort::InvalidArgument("--generate=" + std::to_string(FLAGS_generate) + " continues a --prompt, and '" +
                                  FLAGS_prompt + "' has no " + FLAGS_split);
  if (const auto unknown = std::count(context.begin(), context.end(), 1.0f); unknown > 0)
    std::fprintf(stderr, "warning: --prompt: %lld of its %zu tokens are not in the vocabulary (the model reads them as unknown)\n",
                 static_cast<long long>(unknown), context.size());
  const std::int64_t length = FLAGS_sequence_length;
  const bool words = FLAGS_split == "words";
  std::string out = FLAGS_prompt;
  for (std::int64_t i = 0; i < FLAGS_generate; ++i) {
    const auto q = std::min<std::int64_t>(length, static_cast<std::int64_t>(context.size()));
    cohort::Tensor row({1, length});
    std::copy(context.end() - q, context.end(), row.data());
    const cohort::Tensor token = cohort::sample_decode(
        model, row, q - 1, 1, -1.0f,
        {.temperature = static_cast<float>(FLAGS_temperature), .top_k = static_cast<int>(FLAGS_top_k),
         .top_p = static_cast<float>(FLAGS_top_p), .seed = static_cast<std::uint64_t>(FLAGS_seed + i),
         .excluded = {0, 1}});  // neither padding nor an unknown token
    context.push_back(token[0]);
    const std::string& text = vectorizer.vocabulary()[static_cast<std::size_t>(token[0])];
    out += (words ? " " : "") + text;
  }
  std::printf("generated: %s\n", out.c_str());
}

// Generation alone, from --checkpoint_dir's latest checkpoint, with the flags it recorded.
void generate_from_checkpoint() {
  const std::string dir = FLAGS_checkpoint_dir;
  const std::optional<cohort::Checkpoint> latest = cohort::CheckpointManager(dir).restore_latest();
  if (!latest) throw cohort::InvalidArgument("--checkpoint_dir=" + dir + ": no checkpoint to generate with");
  for (const auto& [name, value] : settings())
    if (const auto saved = latest->metadata.find("settings/" + name); saved != latest->metadata.end()) {
      if (cohort::flags::Registry::global().given(name.substr(2)) && value != saved->second)
        std::fprintf(stderr, "warning: %s=%s: the checkpoint's model was trained with %s=%s, which it keeps\n",
                     name.c_str(), value.c_str(), name.c_str(), saved->second.c_str());
      cohort::flags::Registry::global().set(name.substr(2), saved->second, "--checkpoint_dir=" + dir);
    }
  const cohort::data::TextVectorizer vectorizer = saved_vocabulary(dir + "/vocabulary.txt");
  cohort::Graph graph;
  cohort::Model model = language_model(graph, vectorizer.vocabulary_size());
  graph.initialize(0);
  cohort::restore_variables(*latest, graph);
  generate(model, vectorizer);
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {
    server.join();
    return 0;
  }
  if (FLAGS_train.empty()) {
    if (FLAGS_generate == 0 || FLAGS_checkpoint_dir.empty())
      throw cohort::InvalidArgument("--train is required (or --generate with --checkpoint_dir, to write with a trained model)");
    if (server.is_chief()) generate_from_checkpoint();
    server.done();
    return 0;
  }
  // Every worker reads the whole text and builds the same vocabulary; each trains on its shard
  // of the windows, and the chief measures on the held-out end.
  cohort::data::TextVectorizer vectorizer(text_options());
  const std::vector<std::string> text = vectorizer.tokens(read_text(FLAGS_train));
  if (text.empty()) throw cohort::InvalidArgument("--train=" + FLAGS_train + ": no " + FLAGS_split + " in it");
  // The vocabulary is the training part's: the held-out end's other tokens are unknown to it.
  const auto held = static_cast<std::size_t>(static_cast<double>(text.size()) * FLAGS_validation_split);
  vectorizer.adapt(std::vector<std::string>{joined(text.begin(), text.end() - static_cast<std::ptrdiff_t>(held))});
  const std::vector<float> ids = token_ids(vectorizer, text);
  const cohort::data::Dataset all = windows(ids, 0, ids.size() - held, "--train=" + FLAGS_train);
  std::optional<cohort::data::Dataset> held_out;
  if (held > 0) held_out = windows(ids, ids.size() - held, ids.size(), "--validation_split's held-out end of --train");
  const cohort::data::Dataset train = all.shard(server.replica_index(), server.num_replicas());
  const std::int64_t tokens = vectorizer.vocabulary_size();
  if (server.is_chief() && !FLAGS_checkpoint_dir.empty()) {
    // The ids the checkpoints were trained with: a resumed job must make the same.
    const std::string saved = FLAGS_checkpoint_dir + "/vocabulary.txt";
    if (std::filesystem::exists(saved)) {
      if (saved_vocabulary(saved).vocabulary() != vectorizer.vocabulary())
        throw cohort::InvalidArgument("--train=" + FLAGS_train + ": its vocabulary is not the one the checkpoints in " +
                                      FLAGS_checkpoint_dir + " were trained with (" + saved + ")");
    }
    std::filesystem::create_directories(FLAGS_checkpoint_dir);
    vectorizer.save_vocabulary(saved);
  }

  cohort::Graph graph{cohort::ReplicaDeviceSetter(cohort::replica_device_setter_options_from_flags(
      cluster.num_tasks("ps"), server.worker_device()))};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.seed = static_cast<std::uint64_t>(FLAGS_seed);
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  cohort::OptimizerOptions optimizer;
  optimizer.name = "adam";
  optimizer.learning_rate = cohort::LearningRateSchedule::for_run("cosine", FLAGS_learning_rate, FLAGS_train_steps,
                                                               FLAGS_lr_warmup_steps);
  optimizer.clip_norm = FLAGS_clip_norm;
  if (server.is_chief())
    std::printf("language model: %lld tokens (%lld held out), a vocabulary of %lld, %lld windows of %lld to train on\n",
                static_cast<long long>(ids.size()), static_cast<long long>(held), static_cast<long long>(tokens),
                static_cast<long long>(all.size()), static_cast<long long>(FLAGS_sequence_length));
  cohort::Trainer trainer(
      &server, graph, [&](cohort::Graph& g) { return language_model(g, tokens); }, train,
      cohort::Optimizer::create(optimizer), options);
  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .checkpoint_dir = FLAGS_checkpoint_dir,
      .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps), std::make_shared<cohort::NanTensorHook>()},
      .settings = settings()});
  while (!session->should_stop()) session->run();
  session->close();  // the graph now holds the final parameters
  if (server.is_chief()) {
    if (held_out) {
      const cohort::StepMetrics m = trainer.evaluate(*held_out);
      const auto& names = trainer.model().metric_names();
      const auto at = std::find(names.begin(), names.end(), "perplexity") - names.begin();
      const float perplexity = m.metrics[static_cast<std::size_t>(at)];
      std::printf(
          "language model: %d worker%s, global step %lld, held-out loss %.4f, perplexity %.3f, "
          "next-token accuracy %.4f\n",
          server.num_replicas(), server.num_replicas() == 1 ? "" : "s",
          static_cast<long long>(trainer.read_global_step()), m.loss, perplexity, m.accuracy);
      if (!FLAGS_metrics_json.empty())
        cohort::write_json_object(FLAGS_metrics_json, {{"loss", m.loss}, {"perplexity", perplexity}, {"accuracy", m.accuracy}});
    }
    if (FLAGS_generate > 0) generate(trainer.model(), vectorizer);
  }
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
