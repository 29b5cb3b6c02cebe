#pragma once
// Every standard hook and the MonitoredTrainingSession factory. Custom hooks are plain
// subclasses of cohort::SessionRunHook (core/train/session.h).

#include "cohort/hooks/checkpoint_saver_hook.h"
#include "cohort/hooks/early_stopping_hook.h"
#include "cohort/hooks/final_ops_hook.h"
#include "cohort/hooks/global_step_waiter_hook.h"
#include "cohort/hooks/logging_tensor_hook.h"
#include "cohort/hooks/monitored_training_session.h"
#include "cohort/hooks/nan_tensor_hook.h"
#include "cohort/hooks/profiler_hook.h"
#include "cohort/hooks/second_or_step_timer.h"
#include "cohort/hooks/step_counter_hook.h"
#include "cohort/hooks/stop_at_step_hook.h"
#include "cohort/hooks/summary_saver_hook.h"
#include "cohort/hooks/validation_hook.h"
