// A text classifier trained on the user's own folder of text files, a subfolder per class (as
// Keras's text_dataset_from_directory takes them), or CSV file of texts and their classes, on any
// number of workers:
//
//   mpirun -np 4 build/bin/example_text --train=reviews/train --test=reviews/test --model=bilstm
//   mpirun -np 4 build/bin/example_text --train=reviews --validation_split=0.2 --split=characters
//   mpirun -np 4 build/bin/example_text --train=reviews.csv --text_column=review --validation_split=0.2
//
// Each .txt file, or each row of the CSV file, is an example. The texts are standardised (lower case, no punctuation), split
// into words (or characters) and turned into token ids by a vocabulary of the --max_tokens most
// frequent tokens of the training texts, which every worker builds alike from the whole training
// set (the chief writes it to --vocabulary_file, one token a line, for use elsewhere); each text
// is cut or padded to --sequence_length ids (padding id 0 after the text). The model: an
// Embedding of --embedding_dim, then --model's sequence encoder (cohort::sequence_encoder:
// conv1d, lstm, gru, bilstm or transformer, --units wide; all but conv1d skip the padding under
// a mask of id 0), then the logits. --word_vectors starts the embedding from pre-trained
// vectors (GloVe's or word2vec's text format; --freeze_word_vectors keeps them). The chief
// evaluates on --test (or the --validation_split part of --train) and prints the test loss and
// accuracy.
//
// With --checkpoint_dir the chief keeps checkpoints there, beside what they go with: the
// vocabulary (vocabulary.txt) and the classes (classes.txt); the flags that shape the model and
// its input are recorded in each checkpoint (SessionOptions::settings). A restarted job resumes
// from the latest, and refuses a training folder, classes or flags that are not the
// checkpoint's. --predict then classifies new texts with the latest checkpoint, with its
// settings, without training:
//
//   build/bin/example_text --checkpoint_dir=ckpt --predict=new_reviews --predictions=labels.csv
#include <cohort/cohort.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

COHORT_DEFINE_string(train, "", "training texts: a folder with a subfolder of .txt files per class, or a CSV file of a text and a label a row (.tsv: tab-separated; either may be gzip-compressed)");
COHORT_DEFINE_string(test, "", "test texts, the same way (empty: evaluate on --validation_split's part of --train, or on all of it)");
COHORT_DEFINE_string(text_column, "text", "a CSV file's column of texts (by name; without a header row, by index)");
COHORT_DEFINE_string(label_column, "label", "a CSV file's column of classes: names, or indices 0, 1, ...");
COHORT_DEFINE_bool(header, true, "a CSV file's first row names its columns");
COHORT_DEFINE_bool(quotes, true, "a CSV file's fields may be quoted (false: a quote is part of the text); a .tsv file's are not unless given");
COHORT_DEFINE_float(validation_split, 0,
                    "without --test: hold out this fraction of --train's files, chosen by --seed, to evaluate on",
                    cohort::flags::Range{0, 0.99});
COHORT_DEFINE_int(seed, 1, "--validation_split's choice, and the training data order", cohort::flags::Range{0, 1e15});
COHORT_DEFINE_string(split, "words", "tokens: words (between white space) or characters",
                     cohort::flags::Choices{"words", "characters"});
COHORT_DEFINE_int(max_tokens, 20000, "the vocabulary's size, ids 0 (padding) and 1 (unknown) included",
                  cohort::flags::Range{3, 1 << 24});
COHORT_DEFINE_int(sequence_length, 200, "ids per text: longer texts are cut, shorter ones padded",
                  cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_string(vocabulary_file, "", "chief: write the vocabulary here, one token a line in id order");
COHORT_DEFINE_int(embedding_dim, 64, "the length of each token's vector", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_string(model, "conv1d", "the sequence encoder",
                     cohort::flags::Choices{"conv1d", "lstm", "gru", "bilstm", "transformer"});
COHORT_DEFINE_int(units, 64, "filters, recurrent units or the Transformer's width", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_string(mode, "allreduce", "how workers combine updates (sync, async, ssp need --ps_tasks)",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"});
COHORT_DEFINE_string(optimizer, "adam", "the optimizer",
                     cohort::flags::Choices{"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"});
COHORT_DEFINE_float(learning_rate, 0.002, "learning rate", cohort::flags::Range{.min = 0, .max = 1e3, .min_excluded = true});
COHORT_DEFINE_string(lr_schedule, "constant", "the learning rate over training: constant, or after --lr_warmup_steps down to a tenth (cosine, polynomial: linear, exponential)",
                     cohort::flags::Choices{"constant", "cosine", "polynomial", "exponential"});
COHORT_DEFINE_int(lr_warmup_steps, 0, "global steps over which the learning rate rises linearly to its value", cohort::flags::Range{0, 1e12});
COHORT_DEFINE_float(weight_decay, 0.0, "weight decay of kernels: L2, or decoupled with --optimizer=adamw", cohort::flags::Range{0, 1});
COHORT_DEFINE_float(clip_norm, 0.0, "clip gradients to this global norm (0: no clipping)", cohort::flags::Range{0, 1e30});
COHORT_DEFINE_float(moving_average_decay, 0.0,
                    "keep a moving average of the parameters with this decay (e.g. 0.99) on the "
                    "chief, and evaluate, checkpoint (--predict then uses it) with it (0: none)",
                    cohort::flags::Range{0, 0.999999});
COHORT_DEFINE_int(batch_size, 32, "texts per worker step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_int(train_steps, 500, "global steps to train (not with --epochs)", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_int(epochs, 0, "passes over the training texts, counted globally, instead of --train_steps (0: --train_steps)",
                  cohort::flags::Range{0, 1e6});
COHORT_DEFINE_string(checkpoint_dir, "", "chief: restore the latest checkpoint from, and save checkpoints to, here");
COHORT_DEFINE_string(metrics_json, "", "chief: write the test loss and accuracy to this JSON file");
COHORT_DEFINE_string(predict, "",
                     "with --checkpoint_dir: classify these texts (a folder of .txt files, at any depth, or files, comma-separated, or a CSV file's --text_column, a row each) instead of training");
COHORT_DEFINE_string(predictions, "", "write the predictions here as CSV (empty: to stdout, after the job's log lines)");
COHORT_DEFINE_string(word_vectors, "",
                     "start the embedding from pre-trained word vectors: a GloVe or word2vec text file (a word and its values a line), of --embedding_dim values each");
COHORT_DEFINE_bool(freeze_word_vectors, false, "with --word_vectors: keep them as they are and train the rest of the model");

namespace {

cohort::Model classifier(cohort::Graph& graph, std::int64_t length, std::int64_t vocabulary,
                         int classes) {
  cohort::Model model(graph);
  cohort::Node ids = model.input({length});
  // Id 0 is padding: the recurrent layers, the attention and its pooling read each text alone.
  const cohort::Node mask = model.apply(cohort::padding_mask("mask"), ids);
  cohort::Node x = model.apply(cohort::embedding("embedding", vocabulary, FLAGS_embedding_dim), ids);
  x = cohort::sequence_encoder(model, x, FLAGS_model, FLAGS_units, mask);
  model.apply(cohort::dense("logits", classes), x);
  return model;
}

// The flags a checkpoint's model and input depend on (SessionOptions::settings, recorded in
// every checkpoint): a resumed job must give the same, and --predict takes them from it.
std::map<std::string, std::string> settings() {
  return cohort::flags::flag_values({"split", "max_tokens", "sequence_length", "embedding_dim", "model", "units"});
}

// Sets those flags from a checkpoint's settings (its metadata's "settings/--NAME").
void adopt_settings(const cohort::Checkpoint& checkpoint) {
  for (const auto& [name, value] : settings())
    if (const auto saved = checkpoint.metadata.find("settings/" + name); saved != checkpoint.metadata.end())
      cohort::flags::Registry::global().set(name.substr(2), saved->second, "--checkpoint_dir=" + FLAGS_checkpoint_dir);
}

cohort::data::TextOptions text_options() {
  cohort::data::TextOptions text;
  text.split = FLAGS_split == "words" ? cohort::data::TextOptions::Split::kWords
                                      : cohort::data::TextOptions::Split::kCharacters;
  text.max_tokens = FLAGS_max_tokens;
  text.sequence_length = FLAGS_sequence_length;
  return text;
}

// The lines of `path` (a file the chief wrote beside the checkpoints).
std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw cohort::InvalidArgument(path + ": cannot read it (was the job trained with this --checkpoint_dir?)");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void write_lines(const std::string& path, const std::vector<std::string>& values) {
  std::ofstream out(path);
  for (const std::string& value : values) out << value << '\n';
  out.flush();
  if (!out) throw cohort::InvalidArgument(path + ": cannot write it");
}

// `path` in lower case, for its extension.
std::string lower(std::string path) {
  std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return path;
}

// --predict's files: the .txt files (in any case) under a folder, sorted, hidden ones and
// hidden folders left out, links followed; or the files given.
std::vector<std::string> texts_to_predict() {
  namespace fs = std::filesystem;
  const auto hidden = [](const fs::path& p) { return p.filename().string().starts_with("."); };
  std::vector<std::string> paths;
  for (const std::string& given : cohort::flags::split_list("predict", FLAGS_predict)) {
    if (!fs::is_directory(given)) {
      paths.push_back(given);
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(given, fs::directory_options::follow_directory_symlink);
    for (const fs::recursive_directory_iterator end; it != end; ++it) {
      if (hidden(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && lower(it->path().extension().string()) == ".txt")
        found.push_back(it->path().string());
    }
    if (found.empty()) throw cohort::InvalidArgument("--predict=" + given + ": no .txt files in it");
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

// Whether `path` names a CSV or TSV file (plain or gzip-compressed), by its name.
bool csv_file(const std::string& path) {
  const std::string name = lower(path);
  return name.ends_with(".csv") || name.ends_with(".csv.gz") || name.ends_with(".tsv") || name.ends_with(".tsv.gz");
}

// How to read the CSV or TSV file `path`: the flags' columns, header and quoting (a TSV file's
// texts unquoted unless --quotes is given).
cohort::data::TextCsvOptions csv_options(const std::string& path) {
  const std::string name = lower(path);
  const bool tsv = name.ends_with(".tsv") || name.ends_with(".tsv.gz");
  return {.text_column = FLAGS_text_column, .label_column = FLAGS_label_column, .delimiter = tsv ? '\t' : ',',
          .header = FLAGS_header,
          // A TSV file's texts hold quotes unpaired, as a rule.
          .quotes = cohort::flags::Registry::global().given("quotes") ? FLAGS_quotes : !tsv};
}

// The texts of `path` (--train or --test): a folder of class subfolders, or a CSV or TSV file;
// `classes` receives the classes' names (a CSV file's indices as text). `read` says the shard,
// the classes to take and the split; `vectorizer` adapts to the texts read without a vocabulary.
cohort::data::Dataset load_texts(const std::string& path, cohort::data::TextVectorizer& vectorizer,
                                 const cohort::data::TextFolderOptions& read,
                                 std::vector<std::string>* classes = nullptr) {
  if (std::filesystem::is_directory(path)) return cohort::data::load_text_folder(path, vectorizer, read, classes);
  cohort::data::TextCsvOptions csv = csv_options(path);
  csv.shard = read.shard;
  csv.validation_split = read.validation_split;
  csv.subset = read.subset;
  csv.seed = read.seed;
  // The training file's classes: its indices (named "0", "1", ...: their count is the classes,
  // whatever a label's digits, 1 or 1.0) or its names.
  bool indices = !read.class_names.empty();
  for (std::size_t c = 0; c < read.class_names.size(); ++c) indices = indices && read.class_names[c] == std::to_string(c);
  if (indices) csv.num_classes = static_cast<int>(read.class_names.size());
  else csv.class_names = read.class_names;
  std::vector<std::string> names;
  cohort::data::Dataset data = cohort::data::load_text_csv(path, vectorizer, csv, &names);
  if (names.empty())  // a column of class indices: named by them
    for (int c = 0; c < data.num_classes(); ++c) names.push_back(std::to_string(c));
  if (classes != nullptr) *classes = names;
  return data;
}

// Classifies --predict's texts with the latest checkpoint of --checkpoint_dir, and the
// vocabulary, classes and settings beside it: path, class, probability, a line each.
void predict() {
  const std::string dir = FLAGS_checkpoint_dir;
  cohort::CheckpointManager checkpoints(dir);
  const std::optional<cohort::Checkpoint> latest = checkpoints.restore_latest();
  if (!latest) throw cohort::InvalidArgument("--checkpoint_dir=" + dir + ": no checkpoint to predict with");
  adopt_settings(*latest);
  const cohort::data::TextOptions text = text_options();
  cohort::data::TextVectorizer vectorizer(text);
  vectorizer.load_vocabulary(dir + "/vocabulary.txt");
  const std::vector<std::string> classes = lines(dir + "/classes.txt");
  cohort::Graph graph;
  cohort::Model model = classifier(graph, text.sequence_length, vectorizer.vocabulary_size(),
                                   static_cast<int>(classes.size()));
  graph.initialize(0);
  // The moving averages where the checkpoint holds them (the job trained with them).
  cohort::restore_variables(*latest, graph, /*moving_averages=*/true);
  // The texts: the files found, or a CSV file's rows ("reviews.csv:3", its third row of data).
  std::vector<std::string> paths = texts_to_predict(), csv_texts;
  if (paths.size() > 1 && std::any_of(paths.begin(), paths.end(), csv_file))
    throw cohort::InvalidArgument("--predict=" + FLAGS_predict + ": a CSV file's rows are classified alone (one file)");
  if (paths.size() == 1 && csv_file(paths[0])) {
    const std::string csv = paths[0];
    csv_texts = cohort::data::load_csv_texts(csv, csv_options(csv));
    paths.clear();
    for (std::size_t row = 1; row <= csv_texts.size(); ++row) paths.push_back(csv + ":" + std::to_string(row));
  }
  std::ofstream file;
  if (!FLAGS_predictions.empty()) file.open(FLAGS_predictions);
  std::ostream& out = FLAGS_predictions.empty() ? std::cout : file;
  out << "path,class,probability\n";
  // A batch of texts read, vectorised and classified at a time: any number of them fits.
  constexpr std::size_t kBatch = 256;
  const auto n = static_cast<std::int64_t>(classes.size());
  for (std::size_t begin = 0; begin < paths.size(); begin += kBatch) {
    const std::size_t end = std::min(paths.size(), begin + kBatch);
    std::vector<std::string> texts;
    for (std::size_t i = begin; i < end; ++i) {
      if (!csv_texts.empty()) {
        texts.push_back(std::move(csv_texts[i]));
        continue;
      }
      std::ifstream in(paths[i], std::ios::binary);
      if (!in) throw cohort::InvalidArgument("--predict: " + paths[i] + ": cannot read it");
      texts.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const cohort::Tensor probabilities = model.predict_probabilities(vectorizer.vectorize(texts));
    for (std::size_t i = begin; i < end; ++i) {
      const float* row = probabilities.data() + static_cast<std::int64_t>(i - begin) * n;
      const std::int64_t best = std::max_element(row, row + n) - row;
      out << cohort::data::csv_field(paths[i]) << ','
          << cohort::data::csv_field(classes[static_cast<std::size_t>(best)]) << ',' << row[best] << '\n';
    }
  }
  out.flush();
  if (!out) throw cohort::InvalidArgument("--predictions=" + FLAGS_predictions + ": cannot write it");
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  if (FLAGS_epochs > 0 && cohort::flags::Registry::global().given("train_steps"))
    throw cohort::InvalidArgument("--epochs=" + std::to_string(FLAGS_epochs) + " with --train_steps=" +
                                  std::to_string(FLAGS_train_steps) + ": give one");
  if (FLAGS_freeze_word_vectors && FLAGS_word_vectors.empty())
    throw cohort::InvalidArgument("--freeze_word_vectors keeps the vectors of --word_vectors, which is empty");
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {
    server.join();
    return 0;
  }
  // The chief writes its results at the end: paths that cannot be written end the job now.
  if (server.is_chief())
    cohort::check_outputs({{"--predictions", FLAGS_predictions},
                           {"--metrics_json", FLAGS_metrics_json},
                           {"--vocabulary_file", FLAGS_vocabulary_file}},
                          {{"--train", FLAGS_train},
                           {"--test", FLAGS_test},
                           {"--predict", FLAGS_predict},
                           {"--word_vectors", FLAGS_word_vectors}});
  if (!FLAGS_predict.empty()) {
    if (FLAGS_checkpoint_dir.empty())
      throw cohort::InvalidArgument("--predict needs --checkpoint_dir, where a job trained the model");
    if (server.is_chief()) predict();
    server.done();
    return 0;
  }
  const cohort::data::TextOptions text = text_options();
  if (FLAGS_train.empty()) throw cohort::InvalidArgument("--train is required");
  if (FLAGS_validation_split > 0 && !FLAGS_test.empty())
    throw cohort::InvalidArgument("--validation_split with --test=" + FLAGS_test +
                                  ": give one set to evaluate on");
  cohort::data::TextVectorizer vectorizer(text);
  cohort::data::TextFolderOptions read;
  read.shard = {server.replica_index(), server.num_replicas()};
  if (FLAGS_validation_split > 0) {
    read.validation_split = FLAGS_validation_split;
    read.seed = static_cast<std::uint64_t>(FLAGS_seed);
  }
  std::vector<std::string> classes;
  // Every worker adapts the vocabulary to the whole training set, and keeps its shard.
  const cohort::data::Dataset train =
      load_texts(FLAGS_train, vectorizer, read, &classes);
  if (classes.size() < 2)
    throw cohort::InvalidArgument("--train=" + FLAGS_train + ": one class (" + classes.front() +
                                  "): a classifier needs two or more");
  const std::int64_t texts = server.replicas().allreduce(train.size());
  const std::int64_t tokens = vectorizer.vocabulary_size();
  // Workers that read different folders (a copy per node that differs) would train different
  // models: compare a hash of the vocabulary and classes.
  std::uint64_t digest = 1469598103934665603ULL;  // FNV-1a over the tokens and the classes
  for (const std::vector<std::string>* list : {&vectorizer.vocabulary(), &std::as_const(classes)})
    for (const std::string& item : *list)
      for (const char c : item + '\n') digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  const auto mine = static_cast<std::int64_t>(digest >> 1);
  if (server.replicas().allreduce(mine, cohort::mpi::Op::kMax) != mine ||
      server.replicas().allreduce(mine, cohort::mpi::Op::kMin) != mine)
    throw cohort::InvalidArgument("--train=" + FLAGS_train + ": the workers built different "
                                  "vocabularies or classes: do they all see the same folder?");
  std::optional<cohort::data::Dataset> test;
  if (server.is_chief()) {
    read.shard = {};
    read.class_names = classes;
    read.subset = cohort::data::TextFolderOptions::Subset::kValidation;  // with a split
    test = load_texts(FLAGS_test.empty() ? FLAGS_train : FLAGS_test, vectorizer, read);
    if (!FLAGS_vocabulary_file.empty()) vectorizer.save_vocabulary(FLAGS_vocabulary_file);
    if (!FLAGS_checkpoint_dir.empty()) {
      // What the checkpoints' ids and logits mean, beside them; a resumed job must mean the same.
      const std::string dir = FLAGS_checkpoint_dir;
      std::filesystem::create_directories(dir);
      if (std::filesystem::exists(dir + "/vocabulary.txt")) {
        cohort::data::TextOptions any = text;
        any.max_tokens = 1 << 24;
        cohort::data::TextVectorizer saved(any);
        saved.load_vocabulary(dir + "/vocabulary.txt");
        if (saved.vocabulary() != vectorizer.vocabulary())
          throw cohort::InvalidArgument("--train=" + FLAGS_train + ": its vocabulary is not the one " +
                                        "the checkpoints in " + dir + " were trained with");
      }
      if (std::filesystem::exists(dir + "/classes.txt") && lines(dir + "/classes.txt") != classes)
        throw cohort::InvalidArgument("--train=" + FLAGS_train + ": its classes are not the ones the " +
                                      "checkpoints in " + dir + " were trained with (" + dir + "/classes.txt)");
      vectorizer.save_vocabulary(dir + "/vocabulary.txt");
      write_lines(dir + "/classes.txt", classes);
    }
  }

  cohort::Graph graph{cohort::ReplicaDeviceSetter(cohort::replica_device_setter_options_from_flags(
      cluster.num_tasks("ps"), server.worker_device()))};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.seed = static_cast<std::uint64_t>(FLAGS_seed);
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  options.moving_average_decay = FLAGS_moving_average_decay;
  if (FLAGS_freeze_word_vectors) options.trainable_vars = "(?!embedding/embeddings$)";
  // Pre-trained word vectors: the chief makes them a checkpoint of the embedding alone and
  // starts from it (a warm start: a checkpoint in --checkpoint_dir wins, so a restart resumes).
  std::string vectors_checkpoint;
  // Removed once the session has read it, or when a failure unwinds past this (app::Run ends
  // the job after the unwinding).
  struct Removed {
    const std::string& path;
    ~Removed() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove(path, ignored);
    }
  } remove_vectors_checkpoint{vectors_checkpoint};
  if (!FLAGS_word_vectors.empty() && server.is_chief()) {
    std::int64_t found = 0;
    cohort::Tensor table = cohort::data::load_word_vectors(
        FLAGS_word_vectors, vectorizer.vocabulary(), FLAGS_embedding_dim, &found);
    std::printf("text: %lld of the vocabulary's %lld tokens have a vector in %s\n",
                static_cast<long long>(found), static_cast<long long>(tokens),
                FLAGS_word_vectors.c_str());
    cohort::Checkpoint vectors;
    vectors.tensors.push_back({"embedding/embeddings", table.shape(),
                               std::vector<float>(table.span().begin(), table.span().end())});
    vectors.metadata["global_step"] = "0";
    vectors_checkpoint = (std::filesystem::temp_directory_path() /
                          ("cohort-word-vectors-" + std::to_string(getpid()) + ".safetensors"))
                             .string();
    cohort::write_checkpoint(vectors_checkpoint, vectors);
  }
  // --epochs counted globally: a global step takes every worker's batch in allreduce mode.
  // (A job resumed at another global batch plans the rest of its epochs in this run's steps.)
  const std::int64_t train_steps =
      FLAGS_epochs > 0 ? options.steps_for_epochs(FLAGS_epochs, texts, server.num_replicas(),
                                                  cohort::resume_point(server, FLAGS_checkpoint_dir, options))
                       : FLAGS_train_steps;
  cohort::OptimizerOptions optimizer;
  optimizer.name = FLAGS_optimizer;
  optimizer.learning_rate = cohort::LearningRateSchedule::for_run(FLAGS_lr_schedule, FLAGS_learning_rate, train_steps,
                                                               FLAGS_lr_warmup_steps);
  optimizer.weight_decay = FLAGS_weight_decay;
  optimizer.clip_norm = FLAGS_clip_norm;
  if (server.is_chief())
    std::printf("text: %lld global steps, %s, learning rate %g (%s)\n", static_cast<long long>(train_steps),
                cohort::describe(optimizer).c_str(), FLAGS_learning_rate, FLAGS_lr_schedule.c_str());
  const int num_classes = static_cast<int>(classes.size());
  cohort::Trainer trainer(
      &server, graph,
      [&](cohort::Graph& g) { return classifier(g, text.sequence_length, tokens, num_classes); },
      train, cohort::Optimizer::create(optimizer), options);
  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .checkpoint_dir = FLAGS_checkpoint_dir,
      // Epochs count examples, so that a job resumed with other workers trains the rest of them.
      .hooks = {FLAGS_epochs > 0 ? cohort::StopAtStepHook::after_examples(FLAGS_epochs * texts)
                                  : cohort::StopAtStepHook::last(train_steps),
                std::make_shared<cohort::NanTensorHook>()},
      .warm_start_from = vectors_checkpoint,
      .warm_start_vars = vectors_checkpoint.empty() ? "" : "embedding/embeddings$",
      .settings = settings()});
  if (!vectors_checkpoint.empty()) std::filesystem::remove(vectors_checkpoint);
  vectors_checkpoint.clear();
  while (!session->should_stop()) session->run();
  session->close();  // the graph now holds the final parameters
  if (server.is_chief()) {
    const cohort::StepMetrics m = trainer.evaluate(*test);
    // The set evaluated on: --test, --validation_split's part of --train, or all of --train.
    const char* set = !FLAGS_test.empty() ? "test" : FLAGS_validation_split > 0 ? "validation" : "training-set";
    std::printf(
        "text: %d worker%s, %lld texts in %d classes, vocabulary of %lld, global step %lld, "
        "%s loss %.4f, %s accuracy %.4f\n",
        server.num_replicas(), server.num_replicas() == 1 ? "" : "s", static_cast<long long>(texts),
        num_classes, static_cast<long long>(tokens), static_cast<long long>(trainer.read_global_step()),
        set, m.loss, set, m.accuracy);
    if (!FLAGS_metrics_json.empty())
      cohort::write_json_object(FLAGS_metrics_json, {{"loss", m.loss}, {"accuracy", m.accuracy}});
  }
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
