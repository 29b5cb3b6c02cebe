#include "cohort/core/nn/ops/merge.h"

namespace cohort {}  // namespace cohort
