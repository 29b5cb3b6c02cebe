#pragma once
// Everything a training program uses, in one include: <cohort/cohort.h>.
//
// The program's flags and entry point (core/flags.h, core/app.h), the cluster and its server
// (core/cluster.h, core/server.h), data, models, optimizers, the trainer, the monitored session
// with its hooks, checkpoints and summaries (core/, hooks/), and the error types (mpi/error.h).

#include "cohort/core/base/error.h"

#include "cohort/core/base/flags.h"
#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/io/summary_writer.h"
#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/core/nn/threads.h"
#include "cohort/core/placement/device_spec.h"
#include "cohort/core/placement/replica_device_setter.h"
#include "cohort/core/train/app.h"
#include "cohort/core/train/session.h"
#include "cohort/core/train/signals.h"
#include "cohort/core/train/trainer.h"

#include "cohort/hooks/hooks.h"
