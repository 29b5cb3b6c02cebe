#include "cohort/core/nn/ops/pooling.h"

namespace cohort {}  // namespace cohort
