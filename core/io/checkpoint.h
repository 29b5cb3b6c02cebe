#pragma once
// A directory of checkpoints, the way TensorFlow's Saver keeps one:
//
//   dir/model.ckpt-200.safetensors   one file per save (format: core/io/safetensors.h)
//   dir/model.ckpt-300.safetensors
//   dir/checkpoint                   the index: {"latest": "model.ckpt-300.safetensors",
//                                                "all": ["model.ckpt-200.safetensors", ...]}
//
//   cohort::CheckpointManager manager(FLAGS_checkpoint_dir, /*keep_checkpoint_max=*/5);
//   if (auto restored = manager.restore_latest()) start_step = restored->global_step();
//   ...
//   manager.save(step, std::move(checkpoint));   // on the chief only
//
// Every file is replaced crash-safely (temporary file, fsync, rename, fsync of the directory), so
// a process killed at any point leaves the index naming complete, verified files. A checkpoint
// that is nevertheless damaged later (disk fault, truncation by a copy, a hand edit) is detected
// and restore_latest() falls back to an older one: every byte of a file is under a checksum (the
// header's own and the data's, see core/io/safetensors.h), and a count in its metadata that is
// not a whole number in range (global_step, optimizer_iterations) makes the file unusable too.
// Files written before the header checksum (format version "1") still restore; their header is
// trusted, as it was then.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cohort/core/io/safetensors.h"

namespace cohort {

/// Saves, indexes, prunes and restores the checkpoints of one directory.
///
/// Not collective (call it on the chief only) and not thread-safe. One manager, in one process,
/// may write a directory at a time (lock_for_writing() makes sure of it): temporary files left by
/// a crash are removed by the next save(), which would also remove another writer's files in
/// flight. Any number of processes may read the directory while it is written; they see the
/// files before or after a save, never a partial one.
class CheckpointManager {
 public:
  /// Manages `directory`. Reading creates nothing: a directory not there yet has no checkpoint
  /// (as tf.train.latest_checkpoint reads it); save() and lock_for_writing() create it and its
  /// parents, and throw CheckpointError when that fails. A path that is there but is not a
  /// directory throws CheckpointError here. keep_checkpoint_max: how many checkpoints save()
  /// keeps (0 keeps all; negative throws InvalidArgument). keep_checkpoint_every_n_hours
  /// (TensorFlow's Saver option; 0: off): of the checkpoints keep_checkpoint_max would delete,
  /// one every this many hours is kept for good instead — the first written at least that long
  /// after the directory's first manager with this option was made, then each written at least
  /// that long after the last one kept (by the files' modification times; the index records
  /// when the next may come, so a restarted job counts on). The index lists them under "kept":
  /// they are never deleted (a save that cannot read the index deletes nothing), and a restore
  /// takes them in step order with the files the index does not name. Under a second (but
  /// above 0) is refused.
  explicit CheckpointManager(std::string directory, int keep_checkpoint_max = 5,
                             double keep_checkpoint_every_n_hours = 0);

  /// Writes model.ckpt-<step>.safetensors with metadata global_step = `step` (overriding any
  /// given), then the index naming it latest, then deletes the oldest checkpoints beyond
  /// keep_checkpoint_max (the index stops naming them before they are deleted). Also removes
  /// temporary files left by an earlier crash, and adopts checkpoint files the index does not
  /// name (a crash between writing a file and the index) as older than this one. Returns the
  /// path written. Throws InvalidArgument for a negative step or a malformed checkpoint,
  /// CheckpointError when a file cannot be written. Blocking: several fsyncs.
  std::string save(std::int64_t step, Checkpoint checkpoint);

  /// The newest usable checkpoint. Tries the index's latest first; when that file is missing,
  /// truncated or corrupt (either checksum), holds a bad metadata count (the warning names the
  /// field and the value), or its global_step differs from its name, prints one warning line
  /// to stderr naming the file and the fault and falls back: to the index's other files, newest
  /// first, then to any other model.ckpt-<step>.safetensors file in the directory, highest step
  /// first (a missing or corrupt index is warned about and skipped the same way). Temporary
  /// files are never read. Returns std::nullopt when the directory holds no checkpoint file;
  /// throws CheckpointError listing every file tried and its fault when none is usable, and
  /// CheckpointReadError, falling back to nothing, when a file that is there cannot be read (an
  /// I/O or permission error: no reason to think it damaged, and an older checkpoint would
  /// silently lose the steps since).
  std::optional<Checkpoint> restore_latest();
  /// Makes this manager the directory's one writer, before anything is restored or trained:
  /// creates (or opens) directory/checkpoint.lock, which also shows that files can be created
  /// there, and takes an exclusive lock on it (flock) held until the manager is destroyed; the
  /// system drops it when the process dies. Throws CheckpointError naming the directory when no
  /// file can be made there (a read-only file system), or when another process holds the lock
  /// (another job writing the same directory) for `patience`: it waits that long, with one
  /// warning, for the processes of a job killed a moment before to go. Once it holds the lock it
  /// removes the temporary files a crash left. Where the file system takes no lock (flock fails
  /// otherwise: NFS without lockd, Lustre mounted noflock) it says so in a warning, and the
  /// first check is all there is.
  void lock_for_writing(std::chrono::seconds patience = std::chrono::seconds(20));
  /// Releases lock_for_writing()'s lock (a session does as it closes, so that the next one may
  /// take the directory).
  void unlock() { writer_lock_.reset(); }

  /// The index's latest checkpoint (directory/name), std::nullopt when there is no index yet.
  /// Throws CheckpointError when the index cannot be read or is malformed. Does not check the
  /// file itself.
  std::optional<std::string> latest_path() const;
  /// The index's checkpoints, oldest first (empty when there is no index). Throws like
  /// latest_path().
  std::vector<std::string> all_paths() const;

  /// The checkpoints keep_checkpoint_every_n_hours kept for good, oldest first.
  std::vector<std::string> kept_paths() const;

  const std::string& directory() const { return directory_; }
  int keep_checkpoint_max() const { return keep_checkpoint_max_; }

  /// Test hook for crash safety: called for every file save() writes (the checkpoint, then the
  /// index) after the temporary file is written and fsynced and before it is renamed into place.
  /// An exception it throws propagates out of save() and leaves the temporary file behind, as a
  /// crash would. nullptr (the default) disables it.
  void set_before_rename(std::function<void(const std::string& temp_path)> f);

  /// "model.ckpt-<step>.safetensors".
  static std::string file_name(std::int64_t step);
  /// The step of a file named like file_name() returns (no directory), else std::nullopt.
  static std::optional<std::int64_t> step_of(const std::string& file_name);

 private:
  struct Index {
    std::string latest;
    std::vector<std::string> all;
    std::vector<std::string> kept;  // kept for good (keep_checkpoint_every_n_hours)
    std::optional<double> next_kept;  // when the next may be written (system clock, seconds)
  };

  std::string path_of(const std::string& name) const;
  // Creates the directory and its parents where they are not there yet (save(), lock_for_writing()).
  void make_directory() const;
  std::shared_ptr<const int> writer_lock_;  // lock_for_writing()'s open file, closed at the end
  std::string index_path() const;
  // nullopt when there is no index file; throws CheckpointError when it is unusable.
  std::optional<Index> read_index() const;
  void write_index(const Index& index);
  // Checkpoint files in the directory, by step, lowest first.
  std::vector<std::string> files_on_disk() const;
  void remove_temp_files() const;

  std::string directory_;
  int keep_checkpoint_max_;
  std::chrono::seconds keep_every_{0};
  // Without an index that says otherwise: a checkpoint save() would delete is kept if written at
  // or after this.
  std::filesystem::file_time_type first_kept_{};
  BeforeRename before_rename_;
};

}  // namespace cohort
