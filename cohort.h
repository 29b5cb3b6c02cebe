#pragma once
// Everything a training program uses, in one include: <cohort/cohort.h>.
//
// The program's flags and entry point (core/flags.h, core/app.h), the cluster and its server
// (core/cluster.h, core/server.h), data, models, optimizers, the trainer, the monitored session
// with its hooks, checkpoints and summaries (core/, hooks/), and the error types (mpi/error.h).

#include "cohort/mpi/error.h"

#include "cohort/core/app.h"
#include "cohort/core/checkpoint.h"
#include "cohort/core/cluster.h"
#include "cohort/core/data/batch_iterator.h"
#include "cohort/core/data/dataset.h"
#include "cohort/core/device_spec.h"
#include "cohort/core/flags.h"
#include "cohort/core/graph.h"
#include "cohort/core/initializer.h"
#include "cohort/core/layer.h"
#include "cohort/core/model.h"
#include "cohort/core/models.h"
#include "cohort/core/ops/ops.h"
#include "cohort/core/optimizer.h"
#include "cohort/core/replica_device_setter.h"
#include "cohort/core/saver.h"
#include "cohort/core/server.h"
#include "cohort/core/session.h"
#include "cohort/core/signals.h"
#include "cohort/core/summary_writer.h"
#include "cohort/core/tensor.h"
#include "cohort/core/threads.h"
#include "cohort/core/trainer.h"

#include "cohort/hooks/hooks.h"
