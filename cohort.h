#pragma once
// Everything a training program uses, in one include: <cohort/cohort.h>.
//
// By library (docs/ARCHITECTURE.md draws their links): the error types and flags (core/base),
// tensors, layers, models, optimizers and data (core/nn), device specs and the replica device
// setter (core/placement), the cluster, its servers and the training modes (core/dist),
// checkpoints and summaries (core/io), the trainer, the monitored session, the evaluator and
// app::Run (core/train), and the standard hooks (hooks/).

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/base/signals.h"
#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/replication.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/dist/worker_gpus.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/io/summary_writer.h"
#include "cohort/core/nn/composite.h"
#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/loaders.h"
#include "cohort/core/nn/evaluation.h"
#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/layer_graph.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/ops/elementwise.h"
#include "cohort/core/nn/ops/embedding.h"
#include "cohort/core/nn/ops/merge.h"
#include "cohort/core/nn/ops/normalization.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/pooling.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/core/nn/threads.h"
#include "cohort/core/placement/device_spec.h"
#include "cohort/core/placement/gpu_placement.h"
#include "cohort/core/placement/replica_device_setter.h"
#include "cohort/core/train/app.h"
#include "cohort/core/train/evaluator.h"
#include "cohort/core/train/session.h"
#include "cohort/core/train/trainer.h"
#include "cohort/hooks/hooks.h"
